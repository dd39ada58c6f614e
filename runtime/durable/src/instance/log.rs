//! The guest's own log calls: marked appends, conditional appends, recorded reads.
//!
//! Every append first starts the invocation (so that it runs again after a crash, and
//! garbage collection retires its marks) and logs the clock readings it may depend on. A
//! plain append logs no step: a re-execution or a peer that finds its offset of the first
//! mark held gets the holder back, compared with what it asks to append now (other tags
//! or data are non-determinism). A `log.cond-append` logs a `CondAppend` step with what
//! it got before the guest sees it. Reads of the guest's book are readings
//! (`Reading::Log`, up to `READ_BYTES_MAX` bytes of records a step, `recorder.rs`): a
//! replay never reads the log, so records trimmed since (a consumer that trims what it
//! read) replay as they were.

use super::*;

impl Instance {
    /// Appends `data` under `tags` to the invocation's book, once across every execution
    /// of the invocation: at offset `appends` of the mark's stream, where a re-execution
    /// or a peer finds the record an earlier execution appended and returns its seqnum
    /// (a plain append cannot fail at its offset, so every execution counts the same).
    pub async fn append(&mut self, ctx: &mut Context, tags: &[Tag], data: Bytes) -> Result<Result<SeqNum, LogError>, Abort> {
        if let Err(Abort::Refused(e)) = self.writable("an append") {
            return Ok(Err(LogError::InvalidArgument(e.to_string())));
        }
        self.flush(ctx).await?;
        if let Err(e) = guest_tags(tags) {
            return Ok(Err(e));
        }
        self.before_append(ctx).await?;
        match self.core.log.cond_append(ctx, self.book, tags, data.clone(), self.mark(), self.appends).await {
            Ok(s) => {
                self.appends += 1;
                self.effect()?;
                Ok(Ok(s))
            }
            Err(LogError::Conflict { holder: Some(h) }) => {
                self.check_own_append(ctx, h, tags, &data).await?;
                self.appends += 1;
                Ok(Ok(h))
            }
            // The mark was retired (its offsets stay): the invocation finished long ago.
            Err(LogError::Conflict { holder: None }) => Err(Abort::Superseded),
            // Refused arguments are the guest's error (nothing was appended); any other
            // failure ends the attempt, since the append may have taken effect.
            Err(e @ (LogError::InvalidArgument(_) | LogError::TooLarge { .. })) => Ok(Err(e)),
            Err(e) => Err(e.into()),
        }
    }

    /// Appends `data` under `tags` to the invocation's book only at offset `position`
    /// of `cond_tag`'s stream, once across every execution: what it got (the record, or
    /// a conflict) is logged as a step before the guest sees it. A record holding the
    /// offset that carries the conditional mark past the last conditional append is
    /// this step's, appended by an execution that stopped before logging it.
    pub async fn cond_append(
        &mut self,
        ctx: &mut Context,
        tags: &[Tag],
        data: Bytes,
        cond_tag: Tag,
        position: u64,
    ) -> Result<Result<SeqNum, LogError>, Abort> {
        if let Err(Abort::Refused(e)) = self.writable("a conditional append") {
            return Ok(Err(LogError::InvalidArgument(e.to_string())));
        }
        self.flush(ctx).await?;
        if let Err(e) = guest_tags(tags.iter().chain([&cond_tag])) {
            return Ok(Err(e));
        }
        if cond_tag == Tag::ALL {
            return Ok(Err(LogError::InvalidArgument("a conditional append needs a tag other than 0".into())));
        }
        self.before_append(ctx).await?;
        self.step_gate(ctx).await?;
        let data_sha256 = input_sha256(&data);
        let step = |outcome| kind::CondAppend { tag: cond_tag.0, position, data_sha256, outcome };
        let outcome = match self.take_recorded::<kind::CondAppend>(&step(CondOutcome::Conflict(None)).into())? {
            Some((_, logged)) => logged.outcome,
            None => {
                self.check_unfinished(ctx).await?;
                let mut marked = tags.to_vec();
                marked.push(self.cond_mark());
                let got = match self.core.log.cond_append(ctx, self.book, &marked, data, cond_tag, position).await {
                    Ok(s) => {
                        self.effect()?;
                        CondOutcome::Appended(s.0)
                    }
                    Err(LogError::Conflict { holder: Some(h) }) if self.is_own_next(ctx, h).await? => CondOutcome::Appended(h.0),
                    Err(LogError::Conflict { holder }) => CondOutcome::Conflict(holder.map(|h| h.0)),
                    Err(e @ (LogError::InvalidArgument(_) | LogError::TooLarge { .. })) => return Ok(Err(e)),
                    Err(e) => return Err(e.into()),
                };
                self.log(ctx, step(got), &[]).await?.outcome
            }
        };
        match outcome {
            CondOutcome::Appended(s) => {
                self.last_cond_append = s;
                Ok(Ok(SeqNum(s)))
            }
            CondOutcome::Conflict(holder) => Ok(Err(LogError::Conflict { holder: holder.map(SeqNum) })),
        }
    }

    /// What every append does first: the invocation must be started (so that it runs
    /// again after a crash, and its marks are collected), and the readings the guest
    /// took may decide what it appends.
    pub(super) async fn before_append(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        self.init_checked(ctx).await?;
        self.log_clocks(ctx).await?;
        self.marked = true;
        Ok(())
    }

    /// Whether `holder` carries the conditional mark and comes after this instance's
    /// last conditional append: then an earlier execution appended it here. A record
    /// trimmed since cannot be told apart from another's (it only holds the offset).
    pub(super) async fn is_own_next(&self, ctx: &mut Context, holder: SeqNum) -> Result<bool, Abort> {
        if holder.0 <= self.last_cond_append {
            return Ok(false);
        }
        let found = self.core.log.read_next(ctx, self.book, self.cond_mark(), holder).await?;
        Ok(found.is_some_and(|r| r.seqnum == holder))
    }

    /// A read of the guest's book (`next`: the first record of `tag` at or after `at`;
    /// otherwise the last at or before it), the same in every execution: a replay gets
    /// the record the first execution got, as it got it; a live read is recorded
    /// (`recorder.rs`). Marks are not the guest's to see.
    pub async fn read_log(
        &mut self,
        ctx: &mut Context,
        tag: Tag,
        at: SeqNum,
        next: bool,
    ) -> Result<Result<Option<LogRecord>, LogError>, Abort> {
        // While the Init is deferred the reading waits with it (a read of the guest's
        // book reveals nothing of the pending steps).
        if self.deferred.is_none() {
            self.flush(ctx).await?;
        }
        if let Err(e) = guest_tags([&tag]) {
            return Ok(Err(e));
        }
        if let Some(replayed) = self.recorder.replayed_log_read() {
            return Ok(Ok(replayed.map(|r| LogRecord {
                seqnum: SeqNum(r.seqnum),
                tags: r.tags.into_iter().map(Tag).collect(),
                data: r.data,
                aux: r.aux,
            })));
        }
        let log = &self.core.log;
        let found =
            if next { log.read_next(ctx, self.book, tag, at).await } else { log.read_prev(ctx, self.book, tag, at).await };
        // A failed read is not recorded: the attempt ends rather than let the guest act
        // on what a re-execution would not see.
        let found = found?.map(|mut r| {
            r.tags.retain(|t| !t.is_mark());
            r
        });
        self.recorder.log_read(found.as_ref().map(|r| ReadRecord {
            seqnum: r.seqnum.0,
            tags: r.tags.iter().map(|t| t.0).collect(),
            data: r.data.clone(),
            aux: r.aux.clone(),
        }));
        Ok(Ok(found))
    }

    /// A re-execution's append found the record at its offset of the mark: that record
    /// must be what it asks to append now, if the record is still there to compare.
    pub(super) async fn check_own_append(
        &self,
        ctx: &mut Context,
        holder: SeqNum,
        tags: &[Tag],
        data: &[u8],
    ) -> Result<(), Abort> {
        let Some(r) = self.core.log.read_next(ctx, self.book, self.mark(), holder).await? else { return Ok(()) };
        if r.seqnum != holder {
            return Ok(());
        }
        let mut asked: Vec<Tag> = tags.iter().copied().filter(|&t| t != Tag::ALL).collect();
        asked.sort_unstable();
        asked.dedup();
        let theirs: Vec<Tag> = r.tags.iter().copied().filter(|&t| t != self.mark()).collect();
        if theirs != asked || r.data != data {
            return Err(Abort::NonDeterministic(format!(
                "append {} of {} was {} bytes under {} tags and is now {} bytes under {} tags",
                self.appends,
                self.id,
                r.data.len(),
                theirs.len(),
                data.len(),
                asked.len()
            )));
        }
        Ok(())
    }
}
