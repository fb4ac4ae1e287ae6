// A JSON-RPC upstream written the way Go MCP servers read messages: encoding/json into structs. Its
// decoder matches object keys to struct fields case-insensitively ("Name" fills Name as "name" does,
// the last one wins): the sidecar must never forward a body this reads differently from JavaScript.
// Standard library only. Prints its address, then one "EXEC <method> <name>" line per call it runs,
// and for a tools/call one "ARGS <name> force=<bool> sudo=<bool> branch=<string>" line: the arguments
// as a typed Go server reads them (the same case-insensitive matching, into a struct).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
)

type message struct {
	Jsonrpc string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string `json:"name"`
		URI       string `json:"uri"`
		Arguments struct {
			Force  bool   `json:"force"`
			Sudo   bool   `json:"sudo"`
			Branch string `json:"branch"`
		} `json:"arguments"`
	} `json:"params"`
}

var tools = []map[string]any{
	{"name": "echo", "inputSchema": map[string]any{"type": "object"}},
	{"name": "delete_repo", "inputSchema": map[string]any{"type": "object"}},
	{"name": "git_push", "inputSchema": map[string]any{"type": "object"}},
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(out, line)
		out.Flush()
	}
	say(ln.Addr().String())
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var result any = map[string]any{}
		switch m.Method {
		case "tools/list":
			result = map[string]any{"tools": tools}
		case "tools/call":
			say("EXEC tools/call " + m.Params.Name)
			a := m.Params.Arguments
			say(fmt.Sprintf("ARGS %s force=%v sudo=%v branch=%s", m.Params.Name, a.Force, a.Sudo, a.Branch))
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran " + m.Params.Name}}}
		case "resources/read":
			say("EXEC resources/read " + m.Params.URI)
		}
		id := m.ID
		if id == nil {
			id = json.RawMessage("null")
		}
		answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
}
