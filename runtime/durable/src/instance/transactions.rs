//! Durable objects and their transactions as steps of an instance (`objects.rs` has
//! the objects themselves).

use super::*;

impl Instance {
    /// The JSON text at `path` of durable object `object` (`objects.rs`): in a
    /// transaction, at its snapshot with its own writes; otherwise at `cursorTS`, so
    /// every execution reads the same (or, while the Init is deferred, at the
    /// instance's snapshot: `snapshot.rs`). `None` if there is nothing there.
    pub async fn object_get(&mut self, ctx: &mut Context, object: &str, path: &str) -> Result<Option<String>, Abort> {
        objects::check_name(object).map_err(Abort::Refused)?;
        objects::parse_path(path).map_err(Abort::Refused)?;
        if self.txn.is_some() {
            let txn = self.txn.as_ref().expect("checked");
            if !txn.reads.contains(object) && txn.reads.len() >= objects::TXN_READS_MAX {
                return Err(too_many_objects("reads", objects::TXN_READS_MAX));
            }
            self.txn_view(ctx, object).await?;
            let txn = self.txn.as_mut().expect("checked");
            txn.reads.insert(object.to_string());
            return Ok(txn.views[object].text_at(path)?);
        }
        let at = self.read_point(ctx).await?;
        let view = objects::view_at(&self.core, ctx, self.book, object, at).await?;
        Ok(objects::view_text_at(&view, path)?)
    }

    /// Updates durable object `object` with `op`: in a transaction, buffered until its
    /// commit; otherwise an `ObjectWrite` step, also in the object's stream. Refused if
    /// the operation does not fit the object as this instance sees it.
    pub async fn object_update(&mut self, ctx: &mut Context, object: &str, op: ObjOp) -> Result<(), Abort> {
        self.writable("an object write")?;
        objects::check_name(object).map_err(Abort::Refused)?;
        op.check().map_err(Abort::Refused)?;
        // A transaction's write waits for its commit (which a deferred Init may ride).
        if let Some(txn) = &self.txn {
            if txn.read_only {
                return Err(Abort::Refused(Error::InvalidArgument("the transaction is read-only".into())));
            }
            if txn.ops >= objects::TXN_OPS_MAX {
                return Err(Abort::Refused(Error::InvalidArgument(format!(
                    "a transaction makes at most {} operations",
                    objects::TXN_OPS_MAX
                ))));
            }
            self.txn_view(ctx, object).await?;
            let txn = self.txn.as_mut().expect("checked");
            if !txn.writes.contains_key(object) && txn.writes.len() >= objects::TXN_WRITES_MAX {
                return Err(too_many_objects("writes", objects::TXN_WRITES_MAX));
            }
            txn.views.get_mut(object).expect("loaded").apply(&op).map_err(refused)?;
            txn.writes.entry(object.to_string()).or_default().push(op);
            txn.ops += 1;
            return Ok(());
        }
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        // The clock readings first: a re-execution finds them recorded before the step.
        self.log_clocks(ctx).await?;
        let asked = kind::ObjectWrite { object: object.to_string(), ops: vec![op] };
        if self.recorded(&Step::ObjectWrite(asked.clone()))?.is_none() {
            let value = objects::view_at(&self.core, ctx, self.book, object, self.cursor).await?.value.clone();
            let mut view = objects::Folding::new(value, 4);
            view.apply(&asked.ops[0]).map_err(refused)?;
        }
        let tag = self.core.tags.bokistore(object);
        self.log(ctx, asked, &[tag]).await?;
        Ok(())
    }

    /// Loads `object` into the transaction at its snapshot, once.
    pub(super) async fn txn_view(&mut self, ctx: &mut Context, object: &str) -> Result<(), Abort> {
        let txn = self.txn.as_ref().expect("in a transaction");
        if txn.views.contains_key(object) {
            return Ok(());
        }
        let start = txn.start;
        let view = objects::view_at(&self.core, ctx, self.book, object, start).await?;
        let len = view.len();
        let txn = self.txn.as_mut().expect("checked");
        if txn.bytes.saturating_add(len) > objects::TXN_BYTES_MAX {
            return Err(Abort::Refused(Error::TooLarge {
                what: "a transaction's objects",
                size: Some(txn.bytes.saturating_add(len) as u64),
                limit: objects::TXN_BYTES_MAX as u64,
            }));
        }
        txn.bytes += len;
        txn.views.insert(object.to_string(), objects::TxnView::new(view));
        Ok(())
    }

    /// Begins a transaction on durable objects at the instance's `cursorTS`, or at its
    /// snapshot while its Init is deferred (`snapshot.rs`: a read-write one only if
    /// nothing else read there); nothing is logged. Refused inside another.
    pub async fn txn_begin(&mut self, ctx: &mut Context, read_only: bool) -> Result<(), Abort> {
        if self.txn.is_some() {
            return Err(Abort::Refused(Error::InvalidArgument("a transaction is in progress already".into())));
        }
        let start = match read_only {
            true => self.read_point(ctx).await?,
            false => self.write_point(ctx).await?,
        };
        self.txn = Some(Txn::new(start, read_only));
        Ok(())
    }

    /// Ends the transaction in progress: a read-only one, or one that wrote nothing,
    /// commits with nothing logged; otherwise its commit record is logged as a step
    /// (also in the stream of every object it writes) and decided. Returns
    /// whether it committed.
    pub async fn txn_commit(&mut self, ctx: &mut Context) -> Result<bool, Abort> {
        let Some(txn) = self.txn.take() else {
            return Err(Abort::Refused(Error::InvalidArgument("no transaction is in progress".into())));
        };
        if txn.writes.is_empty() {
            return Ok(true);
        }
        let step = txn.commit_step();
        let size = record::step_len(&step);
        if size > crate::abort::PAYLOAD_MAX {
            return Err(Abort::Refused(Error::TooLarge {
                what: "a transaction's writes",
                size: Some(size as u64),
                limit: crate::abort::PAYLOAD_MAX as u64,
            }));
        }
        // In the streams of the objects it writes: a reader of one of them applies it,
        // and a later commit that read one finds it in its window. (An object it only
        // read has nothing to learn from it.)
        let tags: Vec<Tag> = txn.writes.keys().map(|o| self.core.tags.bokistore(o)).collect();
        // The pending steps go first, in a record of their own unless they are readings
        // (and a deferred Init), which the commit takes (`Instance::may_end_group`).
        self.take_clocks(ctx).await?;
        let (seqnum, commit) = self.log_seqnum(ctx, step, &tags).await?;
        self.last_commit = seqnum;
        let committed = objects::decide(&self.core, ctx, self.book, seqnum, commit.start, &commit.reads, None).await?;
        if committed {
            objects::keep_committed(&self.core, ctx, self.book, seqnum, &commit.writes).await?;
        }
        Ok(committed)
    }

    /// Drops the transaction in progress: nothing of it was logged.
    pub fn txn_abort(&mut self) -> Result<(), Abort> {
        match self.txn.take() {
            Some(_) => Ok(()),
            None => Err(Abort::Refused(Error::InvalidArgument("no transaction is in progress".into()))),
        }
    }
}
