// Package jsonscan finds where JSON values end, for the decoders that
// split JSON by slicing instead of decoding it whole: the endpoint's lean
// path (a request's members) and the Redis store's journal entries. It
// does not validate: on valid JSON its answers are exact, on anything else
// they are indexes that the caller's own checks must refuse.
package jsonscan

// Text is what the functions scan: a string or a byte slice.
type Text interface{ ~string | ~[]byte }

// StringEnd returns the index just past the string literal whose opening
// quote is b[i], or len(b) when it is not closed.
func StringEnd[T Text](b T, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// ValueEnd returns the index just past the value that starts at b[i]: a
// string literal, an object or array (to its matching bracket), or a
// scalar (to the next comma, closing bracket or whitespace); len(b) when i
// is past the end.
func ValueEnd[T Text](b T, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}
