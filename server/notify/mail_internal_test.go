package notify

import (
	"bufio"
	"bytes"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/notify"
)

// Text an agent chose never adds a header: a title with line breaks is
// encoded within the Subject.
func TestMailMessageHeaders(t *testing.T) {
	for _, title := range []string{
		"Approve\r\nBcc: victim@example.com",
		"Approve\nX-Injected: 1",
		"Approve café ✓",
	} {
		it := notify.Item{Kind: notify.KindRunProposal, ID: "p1", Title: title, Summary: ".hidden line\nnext", Agent: "bot\r\nX-Agent: 1", URL: "https://a.example/x"}
		msg := mailMessage("assent@example.com", "ada@example.com", it, time.Unix(0, 0))
		hdr, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(msg))).ReadMIMEHeader()
		if err != nil {
			t.Fatalf("%q: headers do not parse: %v", title, err)
		}
		for k := range hdr {
			switch k {
			case "From", "To", "Subject", "Date", "Message-Id", "Mime-Version", "Content-Type", "Content-Transfer-Encoding":
			default:
				t.Errorf("%q: unexpected header %s", title, k)
			}
		}
		if !strings.Contains(string(msg), "\r\n.hidden line\r\n") {
			t.Errorf("%q: body line starting with a dot is changed:\n%s", title, msg)
		}
	}
}
