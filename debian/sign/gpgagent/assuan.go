package gpgagent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// assuan is the client side of one Assuan connection (GnuPG's IPC): a line per command,
// then status (S), data (D) and inquiry (INQUIRE) lines until OK or ERR.
type assuan struct {
	r *bufio.Reader
	w io.Writer
}

// call sends one command and returns the data lines of its answer, unescaped.
func (a *assuan) call(cmd string) ([]byte, error) {
	if _, err := io.WriteString(a.w, cmd+"\n"); err != nil {
		return nil, err
	}
	return a.response()
}

// maxAnswer bounds what an answer may hold: a signature is well under a few KiB.
const maxAnswer = 1 << 20

func (a *assuan) response() ([]byte, error) {
	var data []byte
	for {
		line, err := a.r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read from gpg-agent: %w", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "OK" || strings.HasPrefix(line, "OK "):
			return data, nil
		case strings.HasPrefix(line, "ERR "):
			code, text, _ := strings.Cut(line[4:], " ")
			n, _ := strconv.Atoi(code)
			return nil, &agentError{code: n, text: text}
		case strings.HasPrefix(line, "D "):
			d, err := unescape(line[2:])
			if err != nil {
				return nil, err
			}
			if data = append(data, d...); len(data) > maxAnswer {
				return nil, errors.New("gpg-agent's answer is too long")
			}
		case strings.HasPrefix(line, "INQUIRE "):
			// Nothing armor asks for needs an inquiry answered (a PINENTRY_LAUNCHED
			// notice at most): an empty answer lets the agent go on.
			if _, err := io.WriteString(a.w, "END\n"); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "S ") || strings.HasPrefix(line, "#") || line == "":
		default:
			return nil, fmt.Errorf("gpg-agent sent %q", line)
		}
	}
}

// unescape decodes Assuan's %XX escapes.
func unescape(s string) ([]byte, error) {
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return nil, fmt.Errorf("gpg-agent: truncated escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("gpg-agent: bad escape %q", s[i:i+3])
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.Bytes(), nil
}

// escape escapes a command argument the way SETKEYDESC takes it: %XX for '%', control
// characters and '+', and '+' for a space.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
			b.WriteByte('+')
		case c == '%' || c == '+' || c < 0x20:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
