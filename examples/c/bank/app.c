/*
 * The bank-transfer demo of exactly-once state, in C: the same function as
 * `examples/bank` (Rust), with the same inputs, outputs and errors. Account balances
 * live in the state table `accounts`, moved by transfers that read both balances and
 * write both back.
 *
 *   input                            output
 *   open <account> <amount>          sets the account's balance; `ok`
 *   balance <account>                the balance, 0 for an account never opened
 *   transfer <from> <to> <amount>    moves the amount; `ok <from balance> <to balance>`
 *                                    with the new balances
 *   total <account> ...              the sum of the accounts' balances
 *
 * Amounts and balances are i64 in decimal. Balances may go negative, so a transfer
 * never fails for lack of funds; it fails only on bad input or a failed host call.
 *
 * A transfer is four state operations: get both balances, put both back. If the node
 * crashes between the two puts, the platform runs the invocation again. Without
 * exactly-once state the re-run would read the already debited balance and debit it
 * again, and money would vanish. With it, the re-run's gets return what they returned
 * the first time and each put takes effect once, so a transfer keeps the total of the
 * two balances however often it runs. The operations are not transactions, though: two
 * transfers on one account at the same time may lose an update.
 */
#include <stdlib.h>
#include <string.h>

#include <tally.h>

/** The state table of balances, keyed by account name. */
static const char ACCOUNTS[] = "accounts";

/** Fails with `before` + the quoted account + `after`, as Rust's `{account:?}`. */
static int fail_about(tally_output *out, const char *before, tally_slice account, const char *after) {
    tally_bytes message = TALLY_BYTES_INIT;
    tally_bytes_append_str(&message, before);
    tally_quote(account.data, account.len, &message);
    tally_bytes_append_str(&message, after);
    return tally_fail_take(out, &message);
}

/** The balance of `account`, 0 if it was never opened. */
static int balance(tally_output *out, tally_slice account, int64_t *value) {
    tally_error err;
    bool found;
    *value = 0;
    if (tally_state_get_i64(ACCOUNTS, account.data, account.len, value, &found, &err) != TALLY_OK)
        return tally_fail_error(out, &err);
    return 0;
}

/** Sets the balance of `account`. */
static int set_balance(tally_output *out, tally_slice account, int64_t value) {
    tally_error err;
    if (tally_state_put_i64(ACCOUNTS, account.data, account.len, value, &err) != TALLY_OK)
        return tally_fail_error(out, &err);
    return 0;
}

static int parse_amount(tally_output *out, tally_slice amount, int64_t *value) {
    int parsed = tally_parse_i64(amount.data, amount.len, value);
    if (parsed == TALLY_PARSE_OK)
        return 0;
    tally_bytes message = TALLY_BYTES_INIT;
    tally_bytes_append_str(&message, "the amount ");
    tally_quote(amount.data, amount.len, &message);
    tally_bytes_append_str(&message, " is not an i64: ");
    tally_bytes_append_str(&message, tally_parse_status_message(parsed));
    return tally_fail_take(out, &message);
}

static bool same(tally_slice a, tally_slice b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

/** Runs the command in `words`; the output or the failure goes in `out`. */
static int command(tally_output *out, tally_slice *w, size_t n) {
    int64_t amount, from_balance, to_balance;
    if (n == 3 && tally_slice_eq(w[0], "open")) {
        if (parse_amount(out, w[2], &amount) != 0 || set_balance(out, w[1], amount) != 0)
            return 1;
        tally_output_str(out, "ok");
    } else if (n == 2 && tally_slice_eq(w[0], "balance")) {
        if (balance(out, w[1], &amount) != 0)
            return 1;
        tally_output_i64(out, amount);
    } else if (n == 4 && tally_slice_eq(w[0], "transfer")) {
        if (same(w[1], w[2]))
            return fail_about(out, "cannot transfer from account ", w[1], " to itself");
        if (parse_amount(out, w[3], &amount) != 0 || balance(out, w[1], &from_balance) != 0)
            return 1;
        if (__builtin_sub_overflow(from_balance, amount, &from_balance))
            return fail_about(out, "the balance of ", w[1], " would overflow");
        if (balance(out, w[2], &to_balance) != 0)
            return 1;
        if (__builtin_add_overflow(to_balance, amount, &to_balance))
            return fail_about(out, "the balance of ", w[2], " would overflow");
        if (set_balance(out, w[1], from_balance) != 0 || set_balance(out, w[2], to_balance) != 0)
            return 1;
        tally_output_str(out, "ok ");
        tally_output_i64(out, from_balance);
        tally_output_str(out, " ");
        tally_output_i64(out, to_balance);
    } else if (n >= 1 && tally_slice_eq(w[0], "total")) {
        int64_t total = 0;
        for (size_t i = 1; i < n; i++) {
            if (balance(out, w[i], &amount) != 0)
                return 1;
            if (__builtin_add_overflow(total, amount, &total))
                return tally_fail(out, "the total overflows an i64");
        }
        tally_output_i64(out, total);
    } else {
        return tally_fail(out, "expected `open <account> <amount>`, `balance <account>`, "
                               "`transfer <from> <to> <amount>` or `total <account> ...`");
    }
    return 0;
}

int tally_handle(const uint8_t *input, size_t input_len, tally_output *out) {
    size_t valid_up_to, error_len;
    if (!tally_utf8_check(input, input_len, &valid_up_to, &error_len)) {
        tally_bytes message = TALLY_BYTES_INIT;
        tally_bytes_append_str(&message, "the input is not UTF-8: ");
        tally_utf8_error_text(valid_up_to, error_len, &message);
        return tally_fail_take(out, &message);
    }
    /* Splitting on whitespace also tolerates a trailing newline from `echo`. */
    size_t n = tally_split_whitespace(input, input_len, NULL, 0);
    tally_slice *words = malloc((n + 1) * sizeof *words);
    if (words == NULL)
        abort();
    tally_split_whitespace(input, input_len, words, n);
    int status = command(out, words, n);
    free(words);
    return status;
}
