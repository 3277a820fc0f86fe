package notify_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/assent-run/assent/notify"
)

func ExampleVerify() {
	key, _ := notify.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	body := []byte(`{"type":"decision.pending"}`)
	now := time.Unix(1_700_000_000, 0)
	h := http.Header{}
	notify.SetHeaders(h, key, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", now, body)
	id, err := notify.Verify(key, h, body, now)
	fmt.Println(id, err)
	// Output: msg_2KWPBgLlAfxdpx2AI54pPJ85f4W <nil>
}
