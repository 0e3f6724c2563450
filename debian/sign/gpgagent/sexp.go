package gpgagent

import (
	"errors"
	"fmt"
	"strconv"
)

// sexp is a canonical S-expression: an atom (bytes) or a list.
type sexp struct {
	atom   []byte
	list   []sexp
	isList bool
}

// parseSexp parses one canonical S-expression ("(3:abc(1:x))") that fills data.
func parseSexp(data []byte) (sexp, error) {
	v, rest, err := parseOne(data, 0)
	if err != nil {
		return sexp{}, err
	}
	if len(rest) != 0 {
		return sexp{}, fmt.Errorf("S-expression: %d bytes after the end", len(rest))
	}
	return v, nil
}

func parseOne(data []byte, depth int) (sexp, []byte, error) {
	if depth > 16 {
		return sexp{}, nil, errors.New("S-expression nested too deep")
	}
	if len(data) == 0 {
		return sexp{}, nil, errors.New("S-expression ends early")
	}
	if data[0] == '(' {
		v := sexp{isList: true}
		data = data[1:]
		for {
			if len(data) == 0 {
				return sexp{}, nil, errors.New("S-expression: unclosed list")
			}
			if data[0] == ')' {
				return v, data[1:], nil
			}
			e, rest, err := parseOne(data, depth+1)
			if err != nil {
				return sexp{}, nil, err
			}
			v.list = append(v.list, e)
			data = rest
		}
	}
	i := 0
	for i < len(data) && i < 9 && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(data) || data[i] != ':' {
		return sexp{}, nil, errors.New("S-expression: expected a length and ':'")
	}
	n, _ := strconv.Atoi(string(data[:i]))
	data = data[i+1:]
	if n > len(data) {
		return sexp{}, nil, fmt.Errorf("S-expression: atom of %d bytes, %d left", n, len(data))
	}
	return sexp{atom: data[:n]}, data[n:], nil
}

// find returns the list whose first atom is name, searching depth first.
func (s sexp) find(name string) (sexp, bool) {
	if !s.isList {
		return sexp{}, false
	}
	if len(s.list) > 0 && !s.list[0].isList && string(s.list[0].atom) == name {
		return s, true
	}
	for _, e := range s.list {
		if f, ok := e.find(name); ok {
			return f, true
		}
	}
	return sexp{}, false
}

// value returns the atom after name in the list (name value).
func (s sexp) value(name string) ([]byte, bool) {
	l, ok := s.find(name)
	if !ok || len(l.list) < 2 || l.list[1].isList {
		return nil, false
	}
	return l.list[1].atom, true
}
