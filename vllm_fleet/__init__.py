"""vllm-fleet's operator CLI (ansible-runner underneath); the playbooks do the work."""
