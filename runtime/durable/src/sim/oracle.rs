//! The oracle: a sequential model of every client's invocations, sharing no code with
//! the protocols. Each client runs its invocations one after another on keys of its
//! own, so what every read must return and what every invocation must output follow
//! from the programs alone: the model runs each invocation once, in order, on a plain
//! map, and every execution the system made of it (first runs, re-executions, peers,
//! late peers) must have observed exactly a prefix of what the model observed, on the
//! version the model ran. A logged effect applied twice, an effect of an execution that
//! took another path, a lost write, a read of trimmed history: each shows up as a read
//! that differs from the model, now or in a later invocation of the same client.
//!
//! Clock readings and random numbers are facts of the run, not of the program: the
//! model takes them from a witness, the execution whose output the caller got (its
//! parent's, for a child), and every other execution must have seen the same ones.
//! Only at a clock reading (or a read of the log, recorded the same way, or a read of a
//! table whose reads are logged, which waits for the next record as readings do) may
//! an execution leave the model's path, since a peer reads its own clock before it
//! learns that another logged first; it must then stop before its next effect, which
//! later reads of its keys check.
//!
//! Appends and reads of the log: each client's stream (a tag of its book that only its
//! invocations append to) is modelled as the list of its records' seqnums. A seqnum is
//! a fact of the run (the witness's), but every execution must have got the same one,
//! and seqnums grow in the model's order. A read of the stream returns a window of it
//! (invocations run without their client's log context, so a read may lag, and a guest
//! may have trimmed the book), the same in every execution; a conditional
//! append at the offset the guest's read and appends give must succeed exactly when
//! that is the stream's next offset. After the client's last invocation, its stream
//! must count as many records as the model: an append made twice, even by an execution
//! that crashed before it saw the seqnum, counts once more. One known gap is allowed
//! (`instance/mod.rs`): in a book a guest trimmed whole, a conditional append cut short by a
//! crash may leave a record trimmed before the re-execution looked, which it cannot
//! tell from another's (it gets a conflict); from then on the client's offsets are not
//! counted.
//!
//! For a client that got nothing, the witness is the execution whose output the step log's
//! result holds; an attempt that trapped and was run again is no witness, since what it
//! took but had not logged went with it.

use std::collections::BTreeMap;

use crate::config::Protocol;

use super::guest::{
    awaited_mix, child_input, cond_mix, key_name, mix, outcall_what, prefix, seed_of, Execution, Observed, Op, Registry, Traces,
    DYN_KEYS, KEYS, TABLES,
};

/// What the model says an invocation (or child) observes and outputs.
#[derive(Clone, Debug)]
pub struct Expected {
    pub function: String,
    pub version: u64,
    pub observed: Vec<Observed>,
    /// Which of `observed` are reads of a table whose reads are logged (every table
    /// but the read-optimized one): an execution takes such a read to go in its next
    /// record, so one that stops before that record may have read another value.
    pub logged_reads: std::collections::BTreeSet<usize>,
    /// The output, or the error code the caller sees.
    pub output: Result<u64, String>,
}

#[derive(Default)]
pub struct Oracle {
    /// Per client prefix: (table, key name) to value.
    state: BTreeMap<String, BTreeMap<(usize, Vec<u8>), u64>>,
    /// Per client prefix: the seqnums of its stream's records, by offset.
    streams: BTreeMap<String, Vec<u64>>,
    /// Clients whose streams may hold records the model does not count (see above).
    uncounted: std::collections::BTreeSet<String>,
    /// Books per run: client `cN` uses book `N % books`.
    books: u64,
    expected: BTreeMap<Vec<u8>, Expected>,
    /// Invocations without a key whose answer was lost: nothing names them again, and
    /// they had no effect to check (`abandon`).
    abandoned: std::collections::BTreeSet<Vec<u8>>,
    /// What the callers got, by input: the log's result must say the same
    /// (`answers`).
    answered: BTreeMap<Vec<u8>, Result<u64, String>>,
    pub reads_checked: u64,
    pub outputs_checked: u64,
    pub executions_checked: u64,
}

impl Oracle {
    /// Models the root invocation `input` of `function`, which has finished; returns
    /// what it outputs. `got` is what the client got, if anything: the execution that
    /// output it is the witness of the run's clock readings; without an output to tell
    /// (a trap), the one whose clock readings are the ones `logged` says the step log
    /// of an input holds. Children are modelled as the calls reach them.
    pub fn finish(
        &mut self,
        registry: &Registry,
        traces: &Traces,
        logged: &dyn Fn(&[u8]) -> Vec<u64>,
        function: &str,
        input: &[u8],
        got: Option<&Result<u64, String>>,
    ) -> Result<Expected, String> {
        if let Some(e) = self.expected.get(input) {
            return Ok(e.clone());
        }
        self.model(registry, traces, logged, function, input, got)
    }

    /// What the callers got, by input.
    pub fn answers(&self) -> &BTreeMap<Vec<u8>, Result<u64, String>> {
        &self.answered
    }

    pub fn new(books: u64) -> Oracle {
        Oracle { books, ..Oracle::default() }
    }

    /// The records of a client's stream, as the model counts them (`None` once it may
    /// hold some the model cannot count).
    pub fn appends(&self, client: &str) -> Option<u64> {
        if self.uncounted.contains(client) {
            return None;
        }
        Some(self.streams.get(client).map_or(0, |s| s.len() as u64))
    }

    /// Checks an output a client got against the model.
    pub fn check_output(&mut self, input: &[u8], got: &Result<u64, String>) -> Result<(), String> {
        let e = self.expected.get(input).ok_or_else(|| format!("{} was never modelled", show(input)))?;
        self.outputs_checked += 1;
        self.answered.insert(input.to_vec(), got.clone());
        if &e.output != got {
            return Err(format!("{} output {got:?}, the model says {:?}", show(input), e.output));
        }
        Ok(())
    }

    fn model(
        &mut self,
        registry: &Registry,
        traces: &Traces,
        logged: &dyn Fn(&[u8]) -> Vec<u64>,
        function: &str,
        input: &[u8],
        got: Option<&Result<u64, String>>,
    ) -> Result<Expected, String> {
        let execs = traces.by_input.get(input).map(Vec::as_slice).unwrap_or_default();
        let Some(first) = execs.first() else {
            return Err(format!("{} finished without any execution", show(input)));
        };
        // The execution whose readings the invocation kept: the one that output what the
        // caller got; else the last that ran to its end (a peer that read its own clock
        // stops and runs again, so the last one replayed what was logged).
        // Peers that both ran to a trap (the last attempt's) on readings of their own
        // output nothing to tell them apart: the step log's readings are the witness's.
        let clocks = |e: &Execution| -> Vec<u64> {
            e.observed.iter().filter_map(|o| if let Observed::Clock(v) = o { Some(*v) } else { None }).collect()
        };
        let witness = execs
            .iter()
            .rev()
            .find(|e| e.completed && matches!(got, Some(Ok(v)) if e.output == Some(*v)))
            .or_else(|| {
                let completed: Vec<&Execution> = execs.iter().filter(|e| e.completed).collect();
                let differ = completed.windows(2).any(|w| clocks(w[0]) != clocks(w[1]));
                let logged = if differ { logged(input) } else { Vec::new() };
                // The log also holds readings the guest never saw (a durable sleep's
                // wall clock): the witness's are among them, in order.
                let among = |mine: Vec<u64>| {
                    let mut rest = logged.iter();
                    mine.iter().all(|m| rest.any(|l| l == m))
                };
                completed.into_iter().rev().find(|e| !differ || among(clocks(e)))
            })
            .or_else(|| execs.iter().rev().find(|e| e.completed));

        // A fact of the run at observation `at`: the witness's, else any execution's.
        let fact = |at: usize, kind: fn(&Observed) -> bool| {
            witness
                .and_then(|w| w.observed.get(at))
                .filter(|o| kind(o))
                .or_else(|| execs.iter().find_map(|e| e.observed.get(at).filter(|o| kind(o))))
                .cloned()
        };
        // The version that started it: the witness's. On a node alone an execution may
        // run before the Init is logged (a deferred Init) and stop without logging it
        // (a crash, a lost race); a later one then starts the invocation, maybe on a
        // newer version. Only such executions, before the first on the version that
        // started it, may have run another version; their reads are not the model's.
        // So may a late peer there, which runs the node's version until its deferred
        // Init finds the logged one and stops it (`deferred_stop`).
        let first = witness.unwrap_or(first);
        let started = execs.iter().position(|e| e.version == first.version && e.function == first.function).unwrap_or(0);
        let other = |e: &&Execution| (e.version != first.version || e.function != function) && !deferred_stop(e);
        if let Some(other) = execs[started..].iter().find(other) {
            return Err(format!(
                "{} ran as {} version {} and as {} version {}: an invocation runs the version that started it",
                show(input),
                first.function,
                first.version,
                other.function,
                other.version
            ));
        }
        let program = registry
            .get(function, first.version)
            .ok_or_else(|| format!("{} ran unknown version {} of {function}", show(input), first.version))?
            .program
            .clone();
        let client = prefix(input);
        let mut acc = seed_of(input);
        let mut next = 0u64;
        let mut observed = Vec::new();
        let mut logged_reads = std::collections::BTreeSet::new();
        let mut output = None;
        for (i, op) in program.ops.iter().enumerate() {
            let state = self.state.entry(client.clone()).or_default();
            let slot = |t: &u8, k: u64| (*t as usize % TABLES.len(), key_name(&client, k));
            match op {
                Op::Get { table, key } => {
                    let v = state.get(&slot(table, u64::from(*key))).copied();
                    if TABLES[*table as usize % TABLES.len()].1 != Protocol::ReadOptimized {
                        logged_reads.insert(observed.len());
                    }
                    observed.push(Observed::Read(v));
                    acc = mix(acc, v.map_or(0x5eed, |v| v.wrapping_add(1)));
                }
                Op::Put { table, key } => {
                    state.insert(slot(table, u64::from(*key)), mix(acc, i as u64));
                }
                Op::PutDyn { table } => {
                    let key = u64::from(KEYS) + acc % u64::from(DYN_KEYS);
                    state.insert(slot(table, key), mix(acc, i as u64));
                }
                Op::Incr { table, key } => {
                    let v = state.get(&slot(table, u64::from(*key))).copied();
                    if TABLES[*table as usize % TABLES.len()].1 != Protocol::ReadOptimized {
                        logged_reads.insert(observed.len());
                    }
                    observed.push(Observed::Read(v));
                    acc = mix(acc, v.map_or(0x5eed, |v| v.wrapping_add(1)));
                    state.insert(slot(table, u64::from(*key)), v.unwrap_or(0).wrapping_add(1));
                }
                Op::Delete { table, key } => {
                    state.remove(&slot(table, u64::from(*key)));
                }
                Op::Call { function: callee } => {
                    // Whether the callee existed when the call was first made is a fact of
                    // the run: the executions that reached this call say (and must agree).
                    let at = observed.len();
                    let seen = fact(at, |o| matches!(o, Observed::Call(_)));
                    let result = match seen {
                        Some(Observed::Call(Err(code))) if code == "function_not_found" => Err(code),
                        Some(Observed::Call(out)) => {
                            let child = child_input(input, i);
                            self.model(registry, traces, logged, callee, &child, Some(&out))?.output
                        }
                        other => {
                            return Err(format!(
                                "{} finished, yet no execution shows its call at op {i} ({other:?})",
                                show(input)
                            ))
                        }
                    };
                    acc = match &result {
                        Ok(v) => mix(acc, *v),
                        Err(code) => mix(acc, seed_of(code.as_bytes())),
                    };
                    observed.push(Observed::Call(result));
                }
                Op::Trap => {
                    output = Some(Err("trap".to_string()));
                    break;
                }
                Op::Now { .. } | Op::Random => {
                    let at = observed.len();
                    let seen = match op {
                        Op::Random => fact(at, |o| matches!(o, Observed::Random(_))),
                        _ => fact(at, |o| matches!(o, Observed::Clock(_))),
                    };
                    let v = match &seen {
                        Some(Observed::Clock(v) | Observed::Random(v)) => *v,
                        _ => return Err(format!("{} finished, yet no execution shows its reading at op {i}", show(input))),
                    };
                    acc = mix(acc, v);
                    observed.push(seen.expect("matched"));
                }
                // The answer is one the upstream gave a send of this very call (every
                // send of it carried one key), whichever execution logged it first.
                Op::Outcall => {
                    let at = observed.len();
                    let v = match fact(at, |o| matches!(o, Observed::Outcall(_))) {
                        Some(Observed::Outcall(v)) => v,
                        other => {
                            return Err(format!(
                                "{} finished, yet no execution shows its call out at op {i} ({other:?})",
                                show(input)
                            ))
                        }
                    };
                    let what = outcall_what(input, i);
                    if !traces.upstream.values().any(|(named, answers)| *named == what && answers.contains(&v)) {
                        return Err(format!(
                            "{} got {v} from its call out at op {i}, which the upstream never answered it",
                            show(input)
                        ));
                    }
                    if traces.upstream.values().filter(|(named, _)| *named == what).count() > 1 {
                        return Err(format!("{}'s call out at op {i} was sent under several keys", show(input)));
                    }
                    acc = mix(acc, v);
                    observed.push(Observed::Outcall(v));
                }
                Op::Append | Op::ReadStream | Op::CondAppend => {
                    let at = observed.len();
                    let seen = fact(at, |o| matches!(o, Observed::Appended(_) | Observed::Stream(_) | Observed::CondAppended(_)));
                    let book = client.strip_prefix('c').and_then(|n| n.parse::<u64>().ok()).map(|n| n % self.books.max(1));
                    let trimmed = book.is_some_and(|b| traces.trimmed_books.contains(&b));
                    let uncounted = self.uncounted.contains(&client);
                    let stream = self.streams.entry(client.clone()).or_default();
                    let count = stream.len() as u64;
                    // The seqnum appended, if any, and whether the fact agrees with the model.
                    let (appended, ok) = match (op, &seen) {
                        (Op::Append, Some(Observed::Appended(s))) => (Some(*s), true),
                        // A window of the stream: reads without the client's context may
                        // not see its latest appends yet, and a guest may have trimmed.
                        (Op::ReadStream, Some(Observed::Stream(list))) => {
                            (None, list.is_empty() || stream.windows(list.len()).any(|w| w == list) || uncounted)
                        }
                        (Op::CondAppend, Some(Observed::CondAppended(got))) => match got {
                            Ok(s) => (Some(*s), next == count || uncounted && next > count),
                            Err(holder) if next < count => (None, holder.is_none() || *holder == Some(stream[next as usize])),
                            // An append of an earlier execution that was trimmed before the
                            // re-execution looked (see above).
                            Err(_) if trimmed => {
                                self.uncounted.insert(client.clone());
                                (None, true)
                            }
                            Err(_) => (None, uncounted),
                        },
                        _ => (None, false),
                    };
                    if !ok {
                        return Err(format!(
                            "{} got {seen:?} at op {i} ({op:?}, its next offset {next}); the client's stream holds {count} \
                             records {stream:?}",
                            show(input)
                        ));
                    }
                    if let Some(s) = appended {
                        if stream.last().is_some_and(|&last| last >= s) {
                            return Err(format!("{} appended {s} at op {i}, after {:?}", show(input), stream.last()));
                        }
                        // Offsets the model did not count hold unknown records.
                        if uncounted && next > count && next - count < 1 << 20 {
                            stream.resize(next as usize, 0);
                        }
                        stream.push(s);
                    }
                    match seen.clone().expect("checked above") {
                        Observed::Appended(s) => {
                            acc = mix(acc, s);
                            next += 1;
                        }
                        Observed::Stream(list) => {
                            acc = list.iter().fold(acc, |a, &s| mix(a, s));
                            next = list.len() as u64;
                        }
                        Observed::CondAppended(got) => {
                            acc = cond_mix(acc, got);
                            next += u64::from(got.is_ok());
                        }
                        _ => unreachable!("checked above"),
                    }
                    observed.push(seen.expect("checked above"));
                }
                Op::Approve { .. } => {
                    // The outcome is a fact; a value must be one a completion offered.
                    let at = observed.len();
                    let seen = fact(at, |o| matches!(o, Observed::Awaited { .. }));
                    let Some(Observed::Awaited { promise, value }) = seen.clone() else {
                        return Err(format!("{} finished, yet no execution shows its await at op {i}", show(input)));
                    };
                    if let Some(v) = value {
                        let offered = traces.promise_values.get(&promise).is_some_and(|(offered, _)| offered.contains(&v));
                        if !offered {
                            return Err(format!(
                                "{} awaited {v} from promise {promise}, which no completion offered",
                                show(input)
                            ));
                        }
                    }
                    acc = awaited_mix(acc, value);
                    observed.push(seen.expect("matched"));
                }
                Op::TrimOwnBook | Op::Work { .. } | Op::Sleep { .. } => {}
            }
        }
        let expected = Expected {
            function: function.to_string(),
            version: first.version,
            observed,
            logged_reads,
            output: output.unwrap_or(Ok(acc)),
        };
        self.expected.insert(input.to_vec(), expected.clone());
        Ok(expected)
    }

    /// Every execution of every modelled invocation observed a prefix of what the model
    /// did.
    pub fn check_executions(&mut self, traces: &Traces) -> Result<(), String> {
        for (input, execs) in &traces.by_input {
            let Some(e) = self.expected.get(input) else { continue };
            // Executions before the first on the invocation's version stopped before its
            // Init was logged (see `model`).
            let started = execs.iter().position(|x| x.version == e.version && x.function == e.function).unwrap_or(0);
            for x in &execs[started..] {
                if (x.version != e.version || x.function != e.function) && deferred_stop(x) {
                    continue;
                }
                // A child under a deferred parent logged nothing; if the parent handed
                // back and ran again logged, it called the child anew, maybe under
                // another ID (the deferred parent's reads were steps, the logged one's
                // are not), which draws other random numbers. What such an execution
                // returned reaches the log only as its parent's observation of the call.
                if x.under_deferred {
                    continue;
                }
                self.executions_checked += 1;
                if x.version != e.version || x.function != e.function {
                    return Err(format!(
                        "an execution of {} on node {} ran {} version {}, the invocation is {} version {}",
                        show(input),
                        x.node,
                        x.function,
                        x.version,
                        e.function,
                        e.version
                    ));
                }
                // Where the execution left the model's path: only a reading of its own (a
                // clock, a read of the log, a logged read it had not logged yet) may be
                // the first difference, and nothing after it is checked.
                let differs = x.observed.iter().zip(&e.observed).position(|(a, b)| a != b);
                let left = match differs {
                    Some(at) => {
                        !matches!(
                            (&x.observed[at], &e.observed[at]),
                            (Observed::Clock(_), Observed::Clock(_)) | (Observed::Stream(_), Observed::Stream(_))
                        ) && !(matches!(x.observed[at], Observed::Read(_)) && e.logged_reads.contains(&at))
                    }
                    None => x.observed.len() > e.observed.len(),
                };
                if left {
                    let at = differs.unwrap_or(e.observed.len());
                    return Err(format!(
                        "an execution of {} on node {} observed {:?} at its observation {at}, the model says {:?}",
                        show(input),
                        x.node,
                        x.observed.get(at),
                        e.observed.get(at)
                    ));
                }
                self.reads_checked += x.observed.len() as u64;
            }
        }
        Ok(())
    }

    /// Inputs that ran and were never modelled (never finished, never abandoned).
    pub fn unfinished(&self, traces: &Traces) -> Vec<String> {
        traces
            .by_input
            .iter()
            .filter(|(i, execs)| {
                // A child whose every execution ran under a deferred parent logged nothing.
                let no_effect = execs.iter().all(|e| e.under_deferred);
                !self.expected.contains_key(*i) && !self.abandoned.contains(*i) && !no_effect
            })
            .map(|(i, _)| i)
            .map(|i| show(i))
            .collect()
    }

    /// A read-only invocation sent without a key whose answer was lost (the caller
    /// sends another, under another input): never modelled, never checked.
    pub fn abandon(&mut self, input: &[u8]) {
        self.abandoned.insert(input.to_vec());
    }
}

/// Whether an execution on a version other than its invocation's may be one that ran
/// before its deferred Init found the logged one (`model`): it stopped there, short of
/// its end, so it had no effect.
fn deferred_stop(e: &Execution) -> bool {
    !e.completed
}

pub fn show(input: &[u8]) -> String {
    format!("invocation {:?}", String::from_utf8_lossy(input))
}
