package screen_test

import (
	"fmt"
	"strings"

	"github.com/assent-run/assent/screen"
)

func ExampleParser() {
	p := screen.NewParser(screen.Options{Tools: []string{"payments.confirm"}})
	// Bytes may arrive in any pieces, even inside a line.
	for _, chunk := range []string{
		"root = Card([title, pay])\ntitle = Head",
		"ing(\"Confirm payment\")\npay = Button(\"Pay now\", action=\"pay\")\n",
		"payIt = McpMutation(pay, tool=\"payments.confirm\", params={amount: 42.5})\n",
		"oops = Banner(\"!\")\n",
	} {
		if _, err := p.Write([]byte(chunk)); err != nil {
			panic(err)
		}
	}
	doc := p.End()
	fmt.Println(doc.Node("title").Props["text"])
	fmt.Println(doc.Mutation("pay").Tool)
	for _, issue := range doc.Issues() {
		fmt.Println(issue.Line, issue.Code)
	}
	// Output:
	// Confirm payment
	// payments.confirm
	// 5 unknown_component
}

func ExampleDescribe() {
	doc := screen.Parse(`root = Card([title, email, actions])
title = Heading("Sign in")
$email = "ada@example.com"
email = Input($email, label="Email address", required=true, format="email")
actions = Stack([send])
send = Button("Email me a link", action="sendLink")
m = McpMutation(send, tool="auth.sendMagicLink", params={email: $email})
`, screen.Options{Tools: []string{"auth.sendMagicLink"}})
	fmt.Println(screen.Describe(doc, false))
	fmt.Println(strings.Split(screen.Describe(doc, true), "\n")[2])
	// Output:
	// Card
	//   Heading: Sign in
	//   Input: Email address (required, email)
	//   Button: Email me a link (action: auth.sendMagicLink)
	//   Input: Email address (required, email) = "ada@example.com"
}

func ExampleParser_Update() {
	p := screen.NewParser(screen.Options{Tools: []string{"orders.requestReturn"}})
	_, _ = p.WriteString(`root = Card([status, ret], title="Order 1042")
status = Badge("Shipped")
ret = Button("Request a return", action="requestReturn")
m = McpMutation(ret, tool="orders.requestReturn", params={order: "1042"})
`)
	doc := p.End()

	// The app's code reports the delivery and the pressed button's result.
	res, err := p.Update("status = Badge(\"Delivered\", tone=\"success\")\nret = Notice(\"Return requested\")\n")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Applied, doc.Node("status").Props["text"], doc.Mutation("ret") == nil)

	// An update is applied whole or not at all.
	res, _ = p.Update("status = Badge(\"Lost\")\nextra = Banner(\"?\")\n")
	fmt.Println(res.Applied, res.Issues[0].Line, res.Issues[0].Code, doc.Node("status").Props["text"])
	// Output:
	// true Delivered true
	// false 2 unknown_component Delivered
}

func ExampleDocument_FieldsReadBy() {
	doc := screen.Parse(`root = Stack([name, note, save])
$name = ""
$note = ""
name = Input($name, label="Name", required=true)
note = Input($note, label="Note")
save = Button("Save", action="save")
m = McpMutation(save, tool="people.save", params={name: $name, id: 7})
`, screen.Options{Tools: []string{"people.save"}})
	for _, f := range doc.FieldsReadBy(doc.Mutation("save")) {
		fmt.Println(f.ID, doc.Edits(f.ID))
	}
	// Output:
	// name $name
}
