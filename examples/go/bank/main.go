// The bank-transfer demo of exactly-once state: account balances in the state table
// "accounts", moved by transfers that read both balances and write both back.
//
//	input                           output
//	open <account> <amount>         sets the account's balance; "ok"
//	balance <account>               the balance, 0 for an account never opened
//	transfer <from> <to> <amount>   moves the amount; "ok <from balance> <to balance>"
//	                                with the new balances
//	total <account> ...             the sum of the accounts' balances
//
// Amounts and balances are int64 in decimal. Balances may go negative, so a transfer
// never fails for lack of funds; it fails only on bad input or a failed host call.
//
// A transfer is four state operations: get both balances, put both back. If the node
// crashes between the two puts, the platform runs the invocation again. Without
// exactly-once state the re-run would read the already debited balance and debit it
// again, and money would vanish. With it, the re-run's gets return what they returned
// the first time and each put takes effect once, so a transfer keeps the total of the
// two balances however often it runs. The operations are not transactions, though:
// two transfers on one account at the same time may lose an update.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"tally.dev/tally"
	"tally.dev/tally/state"
)

// accounts is the state table of balances, keyed by account name.
const accounts = "accounts"

func init() {
	tally.Handle(handle)
}

// main is required by the Go compiler, but a Tally function is a library: the
// platform calls the handler declared in init, and main never runs.
func main() {}

func handle(input []byte) ([]byte, error) {
	if !utf8.Valid(input) {
		return nil, errors.New("the input is not UTF-8")
	}
	// Splitting on whitespace also tolerates a trailing newline from echo.
	words := strings.Fields(string(input))
	switch {
	case len(words) == 3 && words[0] == "open":
		amount, err := parseAmount(words[2])
		if err != nil {
			return nil, err
		}
		if err := state.PutInt64(accounts, words[1], amount); err != nil {
			return nil, err
		}
		return []byte("ok"), nil

	case len(words) == 2 && words[0] == "balance":
		balance, err := balance(words[1])
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, balance, 10), nil

	case len(words) == 4 && words[0] == "transfer":
		from, to := words[1], words[2]
		if from == to {
			return nil, fmt.Errorf("cannot transfer from account %q to itself", from)
		}
		amount, err := parseAmount(words[3])
		if err != nil {
			return nil, err
		}
		return transfer(from, to, amount)

	case len(words) >= 1 && words[0] == "total":
		var total int64
		for _, account := range words[1:] {
			balance, err := balance(account)
			if err != nil {
				return nil, err
			}
			var ok bool
			if total, ok = add(total, balance); !ok {
				return nil, errors.New("the total overflows an i64")
			}
		}
		return strconv.AppendInt(nil, total, 10), nil

	default:
		return nil, errors.New("expected `open <account> <amount>`, `balance <account>`, " +
			"`transfer <from> <to> <amount>` or `total <account> ...`")
	}
}

// transfer moves amount from one account to another and returns their new balances.
func transfer(from, to string, amount int64) ([]byte, error) {
	fromBalance, err := balance(from)
	if err != nil {
		return nil, err
	}
	fromBalance, ok := sub(fromBalance, amount)
	if !ok {
		return nil, fmt.Errorf("the balance of %q would overflow", from)
	}
	toBalance, err := balance(to)
	if err != nil {
		return nil, err
	}
	if toBalance, ok = add(toBalance, amount); !ok {
		return nil, fmt.Errorf("the balance of %q would overflow", to)
	}
	if err := state.PutInt64(accounts, from, fromBalance); err != nil {
		return nil, err
	}
	if err := state.PutInt64(accounts, to, toBalance); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "ok %d %d", fromBalance, toBalance), nil
}

// balance returns the balance of account, 0 if it was never opened.
func balance(account string) (int64, error) {
	balance, _, err := state.GetInt64(accounts, account)
	return balance, err
}

func parseAmount(amount string) (int64, error) {
	n, err := strconv.ParseInt(amount, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the amount %q is not an i64: %s", amount, why(err, amount))
	}
	return n, nil
}

// why says why strconv refused a number, in the words of the Rust example (Rust's
// ParseIntError), so that the examples of every SDK answer alike.
func why(err error, text string) string {
	switch {
	case !errors.Is(err, strconv.ErrRange):
		return "invalid digit found in string"
	case strings.HasPrefix(text, "-"):
		return "number too small to fit in target type"
	default:
		return "number too large to fit in target type"
	}
}

// add returns a+b, and false if it overflows an int64.
func add(a, b int64) (int64, bool) {
	sum := a + b
	return sum, (sum > a) == (b > 0)
}

// sub returns a-b, and false if it overflows an int64.
func sub(a, b int64) (int64, bool) {
	difference := a - b
	return difference, (difference < a) == (b > 0)
}
