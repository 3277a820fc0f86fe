package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// Example embeds assent in a Go program: the program opens the store,
// builds the server, creates the workspace's owner, hands the owner a
// sign-in link on its own address, adds an agent the owner supervises,
// serves, and shuts down.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "assent-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db, BaseURL: base})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	boot, err := srv.Bootstrap(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The program serves people at its own address and forwards /signin/
	// to assent.
	link, err := srv.SignInLink(ctx, boot.Owner.ID, "https://app.example.org/assent")
	if err != nil {
		log.Fatal(err)
	}
	token, agent, err := srv.AddAgent(ctx, "billing-bot", []string{"tool.invoke"}, boot.Owner.ID)
	if err != nil {
		log.Fatal(err)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	res, err := http.Get(base + "/v1/health")
	if err != nil {
		log.Fatal(err)
	}
	var health struct{ Status, Store string }
	err = json.NewDecoder(res.Body).Decode(&health)
	res.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	cancel()
	if err := <-served; err != nil {
		log.Fatal(err)
	}

	fmt.Println("sign-in link on the program's address:", strings.HasPrefix(link, "https://app.example.org/assent/signin/"))
	fmt.Println("agent:", agent.Name, "supervised by the owner:", agent.Supervisors[0] == boot.Owner.ID, "token:", token != "")
	fmt.Println("health:", res.StatusCode, health.Status, health.Store)
	// Output:
	// sign-in link on the program's address: true
	// agent: billing-bot supervised by the owner: true token: true
	// health: 200 ok sqlite
}
