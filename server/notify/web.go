package notify

import (
	"embed"
	"errors"
	"net/http"
	"net/url"

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
		Email, Notice string
		MailOn, Owner bool
		Webhooks      []store.Webhook
		Dead          []store.OutboxMessage
	}{Email: email, Notice: p.Gate.TakeNotice(w, r), MailOn: p.Options.SMTP != nil, Owner: p.isOwner(r, pg)}
	if data.Owner {
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
