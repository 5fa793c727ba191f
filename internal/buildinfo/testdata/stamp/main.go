// Command stamp prints buildinfo.Read(); TestLinkerFlags builds it with the
// release builds' -X flags.
package main

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/internal/buildinfo"
)

func main() { fmt.Print(buildinfo.Read()) }
