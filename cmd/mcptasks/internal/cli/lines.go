package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"unicode"
)

// errNoInput is the error of a prompt whose stdin ended.
var errNoInput = errors.New("stdin ended before an answer was given")

// lineReader reads stdin line by line on a goroutine of its own, so that a
// prompt can give up when its context ends (the goroutine stays blocked in
// Read until the process exits; a command reads stdin through one
// lineReader only).
type lineReader struct {
	lines chan line
}

type line struct {
	s   string
	err error
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan line)}
	go func() {
		br := bufio.NewReader(r)
		for {
			s, err := br.ReadString('\n')
			if err != nil && s == "" {
				if errors.Is(err, io.EOF) {
					err = errNoInput
				}
				lr.lines <- line{err: err}
				close(lr.lines)
				return
			}
			lr.lines <- line{s: strings.TrimRight(s, "\r\n")}
		}
	}()
	return lr
}

// read returns the next line, or an error when stdin ended or ctx did.
func (lr *lineReader) read(ctx context.Context) (string, error) {
	select {
	case l, ok := <-lr.lines:
		if !ok {
			return "", errNoInput
		}
		return l.s, l.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// reader returns the command's stdin reader, started on first use.
func (e *env) reader() *lineReader {
	if e.in == nil {
		e.in = newLineReader(e.stdin)
	}
	return e.in
}

// clean makes a string from the server safe to show on a terminal: control
// characters (escape sequences among them) become spaces; newlines stay
// when multiline is set.
func clean(s string, multiline bool) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' && multiline {
			return r
		}
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
