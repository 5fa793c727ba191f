package guard

// keywordSet finds every occurrence of a set of ASCII keywords in a text,
// ASCII letters in either case, overlapping ones included: Aho-Corasick
// compiled to a DFA over byte classes, so that a pass costs one table
// lookup a byte and reads the text in place (no lowered copy). It is the
// secret rules' prefilter (see docs/guards.md).
type keywordSet struct {
	class  [256]uint8 // byte -> class; 0: in no keyword
	stride int        // classes
	next   []int32    // state*stride + class -> the next state's row (state*stride), negated when its out is not empty; state 0 is the root
	out    [][]int32  // state -> keywords ending there (longest first); nil: none
	lens   []int      // keyword -> length
	maxLen int        // the longest keyword's length
}

// newKeywordSet compiles keywords (lower case ASCII, distinct, not
// empty).
func newKeywordSet(keywords []string) *keywordSet {
	ks := &keywordSet{lens: make([]int, len(keywords))}
	n := 1
	for _, k := range keywords {
		for i := 0; i < len(k); i++ {
			c := k[i]
			if ks.class[c] == 0 {
				ks.class[c] = uint8(n)
				n++
			}
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		ks.class[c] = ks.class[c+'a'-'A']
	}
	ks.stride = n
	// The trie: goto transitions, 0 meaning none (the root is never a
	// target).
	ks.next = make([]int32, n)
	ks.out = [][]int32{nil}
	for id, k := range keywords {
		ks.lens[id] = len(k)
		ks.maxLen = max(ks.maxLen, len(k))
		s := 0
		for i := 0; i < len(k); i++ {
			c := int(ks.class[k[i]])
			t := int(ks.next[s*n+c])
			if t == 0 {
				t = len(ks.out)
				ks.out = append(ks.out, nil)
				ks.next = append(ks.next, make([]int32, n)...)
				ks.next[s*n+c] = int32(t)
			}
			s = t
		}
		ks.out[s] = append(ks.out[s], int32(id))
	}
	// Breadth first: a state's failure is the longest proper suffix of its
	// path that is a trie state; a missing transition is its failure's.
	fail := make([]int, len(ks.out))
	queue := []int{}
	for c := 0; c < n; c++ {
		if t := int(ks.next[c]); t != 0 {
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if f := fail[s]; len(ks.out[f]) > 0 {
			ks.out[s] = append(ks.out[s], ks.out[f]...)
		}
		for c := 0; c < n; c++ {
			t := int(ks.next[s*n+c])
			f := int(ks.next[fail[s]*n+c])
			if t == 0 {
				ks.next[s*n+c] = int32(f)
				continue
			}
			fail[t] = f
			queue = append(queue, t)
		}
	}
	for i, t := range ks.next {
		ks.next[i] = t * int32(n)
		if len(ks.out[t]) > 0 {
			ks.next[i] = -ks.next[i]
		}
	}
	return ks
}

// each calls fn with the start offset of every keyword occurrence in
// text, in no particular order. A text of splitAt bytes or more is read as
// four quarters at once: the automaton's steps depend each on the last,
// so independent walks overlap in the processor. A quarter's walk reads
// on past its end as far as a keyword begun in it may reach.
func (ks *keywordSet) each(text string, fn func(start, keyword int)) {
	n := len(text)
	if n < splitAt {
		ks.resume(text, 0, 0, n, n, fn)
		return
	}
	q := n / 4
	lim := [4]int{q, 2 * q, 3 * q, n}
	next, class := ks.next, &ks.class
	var st [4]int32
	s0, s1, s2, s3 := int32(0), int32(0), int32(0), int32(0)
	i := 0
	for ; i < q; i++ {
		s0 = next[s0+int32(class[text[i]])]
		s1 = next[s1+int32(class[text[q+i]])]
		s2 = next[s2+int32(class[text[2*q+i]])]
		s3 = next[s3+int32(class[text[3*q+i]])]
		if s0|s1|s2|s3 < 0 {
			st = [4]int32{s0, s1, s2, s3}
			for k, s := range st {
				if s < 0 {
					st[k] = -s
					ks.report(-s, k*q+i, lim[k], fn)
				}
			}
			s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
		}
	}
	st = [4]int32{s0, s1, s2, s3}
	for k, s := range st {
		end := n
		if k < 3 {
			end = min(n, lim[k]+ks.maxLen-1)
		}
		ks.resume(text, s, k*q+i, end, lim[k], fn)
	}
}

const splitAt = 256

// resume runs the automaton from state s (a row offset) over
// text[from:to], reporting the occurrences that start before limit.
func (ks *keywordSet) resume(text string, s int32, from, to, limit int, fn func(start, keyword int)) {
	next, class := ks.next, &ks.class
	for i := from; i < to; i++ {
		s = next[s+int32(class[text[i]])]
		if s < 0 {
			s = -s
			ks.report(s, i, limit, fn)
		}
	}
}

// report calls fn for the keywords of state row s ending at text[end],
// those that start before limit.
func (ks *keywordSet) report(s int32, end, limit int, fn func(start, keyword int)) {
	for _, k := range ks.out[int(s)/ks.stride] {
		if start := end + 1 - ks.lens[k]; start < limit {
			fn(start, int(k))
		}
	}
}
