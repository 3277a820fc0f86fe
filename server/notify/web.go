package notify

import (
	"context"
	"embed"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

//go:embed templates/*.html
var templateFS embed.FS

// settingsPath is the notifications settings page.
const settingsPath = "/settings/notifications"

func (p *Part) routesWeb(mux *host.Mux) {
	mux.Handle("GET "+settingsPath, p.Gate.WebPage(p.handleSettings))
	mux.Handle("POST "+settingsPath+"/email", p.Gate.WebPage(p.handleSetEmail))
	mux.Handle("POST "+settingsPath+"/quiet", p.Gate.WebPage(p.handleSetQuiet))
	mux.Handle("POST "+settingsPath+"/groups", p.Gate.WebPage(p.ownerOnly(p.handleAddMember)))
	mux.Handle("POST "+settingsPath+"/groups/remove", p.Gate.WebPage(p.ownerOnly(p.handleRemoveMember)))
	mux.Handle("POST "+settingsPath+"/webhooks", p.Gate.WebPage(p.ownerOnly(p.handleAddWebhook)))
	mux.Handle("POST "+settingsPath+"/webhooks/{id}/remove", p.Gate.WebPage(p.ownerOnly(p.handleRemoveWebhook)))
	mux.Handle("POST "+settingsPath+"/dead/{id}/replay", p.Gate.WebPage(p.ownerOnly(p.handleReplay)))
}

func (p *Part) isOwner(r *http.Request, pg host.Page) bool {
	owner, err := p.Store.Settings.Setting(r.Context(), auth.SettingOwner)
	return err == nil && pg.Principal != nil && pg.Principal.ID == owner
}

// ownerOnly refuses h to anyone but the workspace's owner: webhooks and
// dead letters are the workspace's, not a person's.
func (p *Part) ownerOnly(h func(http.ResponseWriter, *http.Request, host.Page)) func(http.ResponseWriter, *http.Request, host.Page) {
	return func(w http.ResponseWriter, r *http.Request, pg host.Page) {
		if !p.isOwner(r, pg) {
			http.Error(w, "only the workspace's owner manages webhooks and dead letters", http.StatusForbidden)
			return
		}
		h(w, r, pg)
	}
}

func (p *Part) handleSettings(w http.ResponseWriter, r *http.Request, pg host.Page) {
	ctx := r.Context()
	if pg.Principal.Kind != store.KindHuman {
		http.Error(w, "notification settings are a person's", http.StatusForbidden)
		return
	}
	email, err := Email(ctx, p.Store.Settings, pg.Principal.ID)
	if err != nil {
		p.Log.Error("notification settings", "err", err)
	}
	data := struct {
		Email, Notice            string
		MailOn, Owner, TakesMail bool
		QuietStart, QuietEnd     string
		Zone                     string
		Webhooks                 []store.Webhook
		Dead                     []store.OutboxMessage
		Members                  []member
		People                   []store.Principal
	}{Email: email, Notice: p.Gate.TakeNotice(w, r), MailOn: p.Options.SMTP != nil, Owner: p.isOwner(r, pg), Zone: "UTC"}
	if data.TakesMail, err = MailOn(ctx, p.Store.Settings, pg.Principal.ID); err != nil {
		p.Log.Error("notification settings", "err", err)
	}
	if q, ok, err := QuietOf(ctx, p.Store.Settings, pg.Principal.ID); err != nil {
		p.Log.Error("notification settings", "err", err)
	} else if ok {
		data.QuietStart, data.QuietEnd, data.Zone = notify.Clock(q.Start), notify.Clock(q.End), q.Zone
	}
	if data.Owner {
		if data.Members, data.People, err = p.members(ctx); err != nil {
			p.Log.Error("notification settings", "err", err)
		}
		if data.Webhooks, err = p.Store.Notify.Webhooks(ctx); err != nil {
			p.Log.Error("notification settings", "err", err)
		}
		if data.Dead, err = p.Store.Notify.ListMessages(ctx, store.MessageDead, 100); err != nil {
			p.Log.Error("notification settings", "err", err)
		}
	}
	pg.Title, pg.Data = "Notifications", data
	p.Web.Render(w, http.StatusOK, "notifications", pg)
}

func (p *Part) handleSetEmail(w http.ResponseWriter, r *http.Request, pg host.Page) {
	if pg.Principal.Kind != store.KindHuman {
		http.Error(w, "only a person has a mail address here", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := SetEmail(r.Context(), p.Store.Settings, pg.Principal.ID, r.PostFormValue("email")); err != nil {
		p.Gate.SetNotice(w, r, "Not saved: "+err.Error())
	} else {
		p.Gate.SetNotice(w, r, "Saved.")
	}
	http.Redirect(w, r, settingsPath, http.StatusSeeOther)
}

func (p *Part) handleAddWebhook(w http.ResponseWriter, r *http.Request, pg host.Page) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	u, err := url.Parse(r.PostFormValue("url"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		p.Gate.SetNotice(w, r, "Not added: give an http or https URL without a user or password.")
		http.Redirect(w, r, settingsPath, http.StatusSeeOther)
		return
	}
	hook := store.Webhook{ID: auth.NewID("wh_"), URL: u.String(), Secret: notify.NewSecret(), CreatedAt: p.Now().UTC()}
	if err := p.Store.Notify.AddWebhook(r.Context(), hook); err != nil {
		p.Log.Error("add webhook", "err", err)
		p.Gate.SetNotice(w, r, "Not added: the store refused it; try again.")
	} else {
		p.Gate.SetNotice(w, r, "Added. Its signing secret, shown only now: "+hook.Secret)
	}
	http.Redirect(w, r, settingsPath, http.StatusSeeOther)
}

func (p *Part) handleRemoveWebhook(w http.ResponseWriter, r *http.Request, pg host.Page) {
	if err := p.Store.Notify.RemoveWebhook(r.Context(), r.PathValue("id")); err != nil && !errors.Is(err, store.ErrNotFound) {
		p.Log.Error("remove webhook", "err", err)
		p.Gate.SetNotice(w, r, "Not removed; try again.")
	} else {
		p.Gate.SetNotice(w, r, "Removed.")
	}
	http.Redirect(w, r, settingsPath, http.StatusSeeOther)
}

func (p *Part) handleReplay(w http.ResponseWriter, r *http.Request, pg host.Page) {
	switch err := p.Store.Notify.ReplayMessage(r.Context(), r.PathValue("id"), p.Now()); {
	case err == nil:
		poke(p.send)
		p.Gate.SetNotice(w, r, "Delivering again.")
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		p.Gate.SetNotice(w, r, "That message is no longer a dead letter.")
	default:
		p.Log.Error("replay", "err", err)
		p.Gate.SetNotice(w, r, "Not replayed; try again.")
	}
	http.Redirect(w, r, settingsPath, http.StatusSeeOther)
}

func (p *Part) handleSetQuiet(w http.ResponseWriter, r *http.Request, pg host.Page) {
	if pg.Principal.Kind != store.KindHuman {
		http.Error(w, "quiet hours are a person's", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	ctx, id := r.Context(), pg.Principal.ID
	start, end, zone := r.PostFormValue("start"), r.PostFormValue("end"), strings.TrimSpace(r.PostFormValue("zone"))
	var q notify.Quiet
	var err error
	if start != "" || end != "" {
		q, err = notify.ParseQuiet(start, end, zone)
	}
	if err == nil {
		err = SetQuiet(ctx, p.Store.Settings, id, q)
	}
	if err == nil {
		err = SetMailOn(ctx, p.Store.Settings, id, r.PostFormValue("mail") == "on")
	}
	if err != nil {
		p.Gate.SetNotice(w, r, "Not saved: "+err.Error())
	} else {
		p.Gate.SetNotice(w, r, "Saved.")
	}
	http.Redirect(w, r, settingsPath+"#quiet", http.StatusSeeOther)
}

// member is one row of the groups section.
type member struct {
	Group, ID, Name string
}

// members lists every group membership with the person's name, and the
// people who may be added.
func (p *Part) members(ctx context.Context) ([]member, []store.Principal, error) {
	ms, err := p.Router.Groups.ListGroupMembers(ctx)
	if err != nil {
		return nil, nil, err
	}
	all, err := p.Store.Principals.ListPrincipals(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := map[string]string{}
	var people []store.Principal
	for _, pr := range all {
		names[pr.ID] = pr.Name
		if pr.Kind == store.KindHuman && !pr.Revoked {
			people = append(people, pr)
		}
	}
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		out = append(out, member{Group: m.Group, ID: m.PrincipalID, Name: names[m.PrincipalID]})
	}
	return out, people, nil
}

func (p *Part) handleAddMember(w http.ResponseWriter, r *http.Request, pg host.Page) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	ctx := r.Context()
	group, id := strings.TrimSpace(r.PostFormValue("group")), r.PostFormValue("person")
	err := store.CheckGroupName(group)
	if err == nil {
		var person store.Principal
		person, err = p.Store.Principals.Principal(ctx, id)
		if err != nil || person.Kind != store.KindHuman || person.Revoked {
			err = errors.New("choose a person from the list")
		}
	}
	if err == nil {
		err = p.Router.Groups.AddGroupMember(ctx, store.GroupMember{Group: group, PrincipalID: id, AddedAt: p.Now().UTC()})
	}
	if err != nil {
		p.Gate.SetNotice(w, r, "Not added: "+strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
	} else {
		p.Gate.SetNotice(w, r, "Added to group "+group+".")
	}
	http.Redirect(w, r, settingsPath+"#groups", http.StatusSeeOther)
}

func (p *Part) handleRemoveMember(w http.ResponseWriter, r *http.Request, pg host.Page) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	switch err := p.Router.Groups.RemoveGroupMember(r.Context(), r.PostFormValue("group"), r.PostFormValue("person")); {
	case err == nil, errors.Is(err, store.ErrNotFound):
		p.Gate.SetNotice(w, r, "Removed.")
	default:
		p.Log.Error("remove group member", "err", err)
		p.Gate.SetNotice(w, r, "Not removed; try again.")
	}
	http.Redirect(w, r, settingsPath+"#groups", http.StatusSeeOther)
}
