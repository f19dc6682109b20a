package tasks

// idLen is the length of an id from NewID: 16 bytes in unpadded base64url.
const idLen = 22

// ValidID reports whether id has the form of an id [NewID] issues: 22
// characters of the base64url alphabet encoding exactly 16 bytes (the last
// character carries 2 bits, so it is one of A, Q, g, w).
//
// Anything else was never issued, so it names no task: the server answers
// it as an unknown task before it reaches the store, and a Store answers
// ErrNotFound for it without running anything. Task ids become parts of
// store keys; this keeps a caller-chosen id such as "queue" from naming a
// key that is not a task's.
func ValidID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	switch id[idLen-1] {
	case 'A', 'Q', 'g', 'w':
		return true
	}
	return false
}
