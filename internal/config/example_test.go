package config_test

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

func ExampleParse() {
	c, err := config.Parse([]byte(`
destinations:
  context7:
    type: stdio
    command: npx -y @upstash/context7-mcp
`), "testdata/none/switchboard.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	d := c.Destinations["context7"]
	fmt.Printf("%s %q %s\n", d.Type, d.Command, d.Isolation)
	// Output: stdio ["npx" "-y" "@upstash/context7-mcp"] shared
}

func ExampleParse_errors() {
	_, err := config.Parse([]byte(`
destinations:
  github:
    type: streamable_http
    urll: https://api.githubcopilot.com/mcp
  tools:
    type: stdio
    command: node "my server.js" --verbose
`), "switchboard.yaml")
	fmt.Println(err)
	// Output:
	// switchboard.yaml:3: destinations.github: url is required for type streamable_http
	// switchboard.yaml:5: destinations.github: unknown key "urll" (did you mean url?)
	// switchboard.yaml:8: destinations.tools.command: quotes are not supported in a command written as one string (no shell parses it); write it as command: [node, "my server.js", --verbose]
}
