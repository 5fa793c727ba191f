package streamable

import "testing"

// TestStreamTagParses checks that every stream tag newStreamTag draws is
// read back from an event id: a tag with the id's separator in it would
// make a resumption start a new stream without replay, at random.
func TestStreamTagParses(t *testing.T) {
	for range 2000 {
		tag := newStreamTag()
		got, cursor, ok := parseEventID(tag + "_1700000000000:1700000000001-3")
		if !ok || got != tag || cursor != "1700000000000:1700000000001-3" {
			t.Fatalf("tag %q: parsed %q %q %v", tag, got, cursor, ok)
		}
	}
	for _, id := range []string{"", "abc", "0123456789ab", "0123456789ab_", "0123456789AB_1.2", "0123456789a__1.2", "0123456789abc_1.2"} {
		if _, _, ok := parseEventID(id); ok {
			t.Errorf("%q parsed as an event id of this front", id)
		}
	}
}
