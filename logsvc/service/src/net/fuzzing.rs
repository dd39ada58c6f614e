//! The transport's decoders as `tally-fuzz` calls them: a stream's hello and frames,
//! read from bytes in memory by the very functions that read a QUIC stream.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use tally_log_core::{Message, NodeId};

use super::frame;

/// Polls a future over bytes in memory, which never waits.
fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("a read of bytes in memory waited"),
    }
}

/// The frames at the start of `stream`, read as a connection reads them until one
/// fails or the stream ends, and how reading ended (`None`: cleanly between frames).
pub fn read_frames(mut stream: &[u8], frame_bytes_max: usize) -> (Vec<Message>, Option<String>) {
    let mut messages = Vec::new();
    loop {
        match ready(frame::read_frame(&mut stream, frame_bytes_max)) {
            Ok(Some(msg)) => messages.push(msg),
            Ok(None) => return (messages, None),
            Err(e) => return (messages, Some(e.to_string())),
        }
    }
}

/// One frame holding `msg`, as the transport writes it.
pub fn encode_frame(msg: &Message, frame_bytes_max: usize) -> Result<Vec<u8>, String> {
    let mut buf = BytesMut::new();
    frame::encode_into(msg, &mut buf, frame_bytes_max).map_err(|e| e.to_string())?;
    Ok(buf.to_vec())
}

/// The hello every stream starts with.
pub fn hello(me: NodeId) -> Vec<u8> {
    frame::hello(me).to_vec()
}

/// The sender a stream's hello names.
pub fn read_hello(mut stream: &[u8]) -> Result<NodeId, String> {
    ready(frame::read_hello(&mut stream)).map_err(|e| e.to_string())
}
