"""Pi (npm ``@earendil-works/pi-coding-agent``): its session files, read and written."""
