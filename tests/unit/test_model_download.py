from __future__ import annotations

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import shown_url


def test_messages_never_show_a_presigned_urls_query_or_credentials():
    presigned = "https://user:secret@bucket.example:9000/models/a.gguf?X-Amz-Signature=abc&X-Amz-Credential=k"
    assert shown_url(presigned) == "https://bucket.example:9000/models/a.gguf?<query hidden>"
    assert shown_url("http://127.0.0.1:8080/demo/a.gguf") == "http://127.0.0.1:8080/demo/a.gguf"
