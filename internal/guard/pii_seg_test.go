package guard

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSegmentsSkip: reading one byte in n finds the card and IBAN
// candidates a byte-by-byte pass finds, over random texts dense in
// digits, capitals, spaces and dashes (where runs start and end anywhere).
func TestSegmentsSkip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const alphabet = "0123456789012345678901234567890123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ  --ab.\n"
	found := 0
	for range 300 {
		b := make([]byte, rng.IntN(200))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		for _, v := range []string{" GB82 WEST 1234 5698 7654 32 ", " DE89370400440532013000.", " 4111 1111 1111 1111 "} {
			if len(b) > len(v) && rng.IntN(2) == 0 {
				copy(b[rng.IntN(len(b)-len(v)):], v)
			}
		}
		s := string(b)
		if got, want := digitRuns(s), digitRunsIn(nil, s, 0, len(s)); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("digitRuns(%q) = %v, a full pass %v", s, got, want)
		}
		if got, want := ibanCandidates(s), ibansIn(nil, s, 0, len(s)); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("ibanCandidates(%q) = %v, a full pass %v", s, got, want)
		}
		found += len(ibanCandidates(s))
	}
	if found < 20 {
		t.Errorf("only %d IBANs among the texts: the test tests little", found)
	}
}
