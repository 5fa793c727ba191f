// Command otlpsink is an OTLP/HTTP receiver that takes every export and
// discards it: the collector for scripts/bench-obs.sh, cheap enough not to
// weigh on the machine it measures. It listens on 127.0.0.1 only.
package main

import (
	"io"
	"log"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: otlpsink PORT")
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Args[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})))
}
