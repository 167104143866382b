"""Qwen Code: ``~/.qwen/projects/<project key>/chats/<session id>.jsonl`` (:mod:`.files`, :mod:`.format`, :mod:`.read`, :mod:`.write`, :mod:`.tools`)."""
