"""What a state is: turns, payloads, the sequence, states, revisions, the op log, merge. No pygit2."""
