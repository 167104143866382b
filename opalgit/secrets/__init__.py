"""Secrets: the rules that recognise them, redaction, the local vault."""
