"""Gemini CLI: where it keeps chats, how they are read, how they are written."""
