package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/store"
)

// Lifetime of a sign-in link.
const SignInLinkTTL = 15 * time.Minute

// Setting names of the bootstrap principals: the person who owns the
// workspace and its first agent.
const (
	SettingOwner = "owner_principal"
	SettingAgent = "agent_principal"
)

// IssueToken creates a principal with a fresh bearer token and returns the
// token (shown once; only its hash is kept). An agent or service is
// supervised by the workspace owner; use IssueTokenFor to name others.
func IssueToken(ctx context.Context, st store.Store, kind, name string, grants []string, now time.Time) (string, store.Principal, error) {
	return IssueTokenFor(ctx, st, kind, name, grants, nil, now)
}

// IssueTokenFor is IssueToken with the ids of the people who supervise the
// new principal. With none given, an agent or service is supervised by the
// workspace owner when st records one. Every supervisor must be a person.
func IssueTokenFor(ctx context.Context, st store.Store, kind, name string, grants, supervisors []string, now time.Time) (string, store.Principal, error) {
	if !store.ValidKind(kind) {
		return "", store.Principal{}, fmt.Errorf("kind %q is not one of human, agent, service", kind)
	}
	if strings.TrimSpace(name) == "" {
		return "", store.Principal{}, errors.New("a principal needs a name")
	}
	if len(supervisors) == 0 && kind != store.KindHuman {
		if owner, err := st.Settings().Setting(ctx, SettingOwner); err == nil {
			supervisors = []string{owner}
		}
	}
	ps := st.Principals()
	for _, id := range supervisors {
		sp, err := ps.Principal(ctx, id)
		if err != nil || sp.Kind != store.KindHuman || sp.Revoked {
			return "", store.Principal{}, fmt.Errorf("unknown_supervisor: %q is not a person; name a human principal", id)
		}
	}
	tok := NewSecret(TokenPrefix)
	p := store.Principal{ID: NewID("p_"), Kind: kind, Name: name, Grants: grants, Supervisors: supervisors, CreatedAt: now.UTC()}
	if err := ps.CreatePrincipal(ctx, p, Hash(tok)); err != nil {
		return "", store.Principal{}, err
	}
	return tok, p, nil
}

// NewSignInLink stores a one-time sign-in link for principalID and returns
// its URL under baseURL.
func NewSignInLink(ctx context.Context, st store.Sessions, principalID, baseURL string, now time.Time) (string, error) {
	secret := NewSecret(SignInPrefix)
	if err := st.CreateSignInLink(ctx, Hash(secret), principalID, now.Add(SignInLinkTTL)); err != nil {
		return "", err
	}
	return strings.TrimRight(baseURL, "/") + "/signin/" + secret, nil
}

// Bootstrap is what a first start creates.
type Bootstrap struct {
	// First is true when this call created the workspace.
	First bool
	// AgentToken is the first agent's token, only when First.
	AgentToken string
	Owner      store.Principal
	Agent      store.Principal
}

// EnsureBootstrap creates, on first start, the person who owns the workspace
// ("owner", who may approve) and one agent with a token. Later calls return
// the same principals and no token.
func EnsureBootstrap(ctx context.Context, st store.Store, now time.Time) (Bootstrap, error) {
	var b Bootstrap
	ps, set := st.Principals(), st.Settings()
	ownerID, err := set.Setting(ctx, SettingOwner)
	if err == nil {
		agentID, err := set.Setting(ctx, SettingAgent)
		if err != nil {
			return b, fmt.Errorf("bootstrap: agent principal missing: %w", err)
		}
		if b.Owner, err = ps.Principal(ctx, ownerID); err != nil {
			return b, fmt.Errorf("bootstrap: owner: %w", err)
		}
		if b.Agent, err = ps.Principal(ctx, agentID); err != nil {
			return b, fmt.Errorf("bootstrap: agent: %w", err)
		}
		return b, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return b, err
	}
	b.First = true
	b.Owner = store.Principal{ID: NewID("p_"), Kind: store.KindHuman, Name: "owner", Grants: []string{"human.approve", "state.write", "tool.invoke", "control.write", "command.execute"}, CreatedAt: now.UTC()}
	if err := ps.CreatePrincipal(ctx, b.Owner, nil); err != nil {
		return b, fmt.Errorf("bootstrap: %w", err)
	}
	tok, agent, err := IssueTokenFor(ctx, st, store.KindAgent, "agent", []string{"state.write", "tool.invoke"}, []string{b.Owner.ID}, now)
	if err != nil {
		return b, fmt.Errorf("bootstrap: %w", err)
	}
	b.AgentToken, b.Agent = tok, agent
	if err := set.SetSetting(ctx, SettingAgent, agent.ID); err != nil {
		return b, err
	}
	// Written last: its presence marks a complete bootstrap.
	if err := set.SetSetting(ctx, SettingOwner, b.Owner.ID); err != nil {
		return b, err
	}
	return b, nil
}
