//! [`Ops`]: what each protocol would cost a table, counted from the order of the
//! operations of each instance, which `auto` weighs (`switch.rs`).

/// Operations counted on one table, and what they cost under each protocol that `auto`
/// chooses from, in log appends and synced store writes. The costs follow from the
/// order of an invocation's operations, the same under either protocol
/// (`Instance::observe`): a read-optimized write waits for the next record, and a read
/// after it logs it first; a write-optimized read waits for the next record too, and a
/// write after it logs it first (as it does a deferred Init), while the run of writes
/// is stored, synced, before the next read or record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ops {
    pub reads: u64,
    pub writes: u64,
    /// Appends a read-optimized table adds: one per read after writes.
    pub ro_appends: u64,
    /// Synced store writes a read-optimized table adds: one per run of writes with a
    /// value too large for its record.
    pub ro_syncs: u64,
    /// Appends a write-optimized table adds: one per run of writes after reads (or
    /// after a deferred Init).
    pub wo_appends: u64,
    /// Synced store writes a write-optimized table adds: one per run of writes.
    pub wo_syncs: u64,
}

/// An instance's last state operation on a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LastOp {
    Read,
    /// A write; `large` if one of the writes since the last read had a value too large
    /// for its record.
    Write {
        large: bool,
    },
}

impl Ops {
    /// A read (`None`) or a write (`Some(large)`: its value is too large for its record)
    /// after `last`, the instance's last operation on the table, if any (`init_deferred`:
    /// its Init waits for its first record): what it adds, and the last operation now.
    pub(crate) fn of(last: Option<LastOp>, write: Option<bool>, init_deferred: bool) -> (Ops, LastOp) {
        let mut ops = Ops::default();
        let now = match write {
            None => {
                ops.reads = 1;
                if matches!(last, Some(LastOp::Write { .. })) {
                    ops.ro_appends = 1;
                }
                LastOp::Read
            }
            Some(large) => {
                ops.writes = 1;
                let large_before = match last {
                    Some(LastOp::Write { large }) => large,
                    _ => {
                        ops.wo_syncs = 1;
                        if last == Some(LastOp::Read) || (last.is_none() && init_deferred) {
                            ops.wo_appends = 1;
                        }
                        false
                    }
                };
                if large && !large_before {
                    ops.ro_syncs = 1;
                }
                LastOp::Write { large: large || large_before }
            }
        };
        (ops, now)
    }

    pub(crate) fn add(&mut self, o: Ops) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.ro_appends += o.ro_appends;
        self.ro_syncs += o.ro_syncs;
        self.wo_appends += o.wo_appends;
        self.wo_syncs += o.wo_syncs;
    }
}
