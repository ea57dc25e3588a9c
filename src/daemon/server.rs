//! The accept loop and the drain.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sd_notify::NotifyState;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};

use super::admission::{self, AcceptBackoff, Socket};
use super::notify::{status_line, Notifier};
use super::{connection, textfile, Context};

/// How often EXTEND_TIMEOUT_USEC is sent while draining, and by how much it extends.
const EXTEND_EVERY: Duration = Duration::from_secs(5);
const EXTEND_BY: Duration = Duration::from_secs(15);
/// After the drain grace, how long cancelled jobs get to reach a partition boundary.
const CANCEL_GRACE: Duration = Duration::from_secs(60);
/// How long connections get to deliver their last responses after the drain.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serves `listener` until `shutdown` resolves, then drains: stops accepting, answers queued
/// jobs "shutting down", lets running jobs finish within `daemon.drain_grace` (then cancels
/// them, or at once when `force` is set), delivers the last responses and returns. Writes
/// `metrics.textfile` meanwhile, where it is set, and one last time before returning.
pub async fn serve(
    ctx: Arc<Context>,
    listener: UnixListener,
    grpc: Option<UnixListener>,
    shutdown: impl Future<Output = ()>,
    force: Arc<AtomicBool>,
    notifier: Notifier,
) {
    let (closing_tx, closing_rx) = watch::channel(false);
    // Every connection task holds a clone; when all are gone, recv() returns None.
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    let mut backoff = AcceptBackoff::default();
    let textfile = textfile::start(&ctx);
    // The gRPC endpoint stops taking calls when the drain starts; the calls in progress are
    // answered by it (queued jobs "shutting down", running ones their result).
    let (stop_grpc, grpc_stopped) = tokio::sync::oneshot::channel::<()>();
    let grpc = grpc.map(|l| {
        let stop = async move {
            let _ = grpc_stopped.await;
        };
        tracing::info!("serving the gRPC endpoint (cuzk.v1.ProvingEngine, with server reflection)");
        tokio::spawn(super::grpc::serve(ctx.clone(), l, stop))
    });
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            (stream, admitted) = admission::accept(&ctx, &listener, Socket::Protocol, &mut backoff) => {
                let (ctx, closing, alive) = (ctx.clone(), closing_rx.clone(), alive_tx.clone());
                tokio::spawn(async move {
                    connection::serve(stream, admitted, ctx, closing).await;
                    drop(alive);
                });
            }
        }
    }
    drop(listener);
    let _ = stop_grpc.send(());
    drain(&ctx, &force, &notifier).await;
    let _ = closing_tx.send(true);
    drop(alive_tx);
    let _ = tokio::time::timeout(CLOSE_GRACE, alive_rx.recv()).await;
    if let Some(grpc) = grpc {
        let _ = tokio::time::timeout(CLOSE_GRACE, grpc).await;
    }
    if let Some(writer) = textfile {
        writer.finish(&ctx).await;
    }
}

/// Stops the engine and waits for running jobs: the drain grace, then cancellation.
async fn drain(ctx: &Context, force: &AtomicBool, notifier: &Notifier) {
    let grace = ctx.config.daemon.drain_grace;
    tracing::info!(
        running = ctx.engine.running(),
        grace_s = grace.as_secs(),
        "stopping: draining running jobs"
    );
    ctx.engine.shut_down();
    let start = Instant::now();
    let mut cancelled_at: Option<Instant> = None;
    let mut last_extend: Option<Instant> = None;
    let mut changes = ctx.engine.changes();
    while ctx.engine.running() > 0 {
        let now = Instant::now();
        if cancelled_at.is_none()
            && (now.duration_since(start) >= grace || force.load(Ordering::SeqCst))
        {
            tracing::warn!(
                running = ctx.engine.running(),
                "drain grace over: cancelling running jobs"
            );
            ctx.engine.cancel_running();
            cancelled_at = Some(now);
        }
        if cancelled_at.is_some_and(|t| now.duration_since(t) >= CANCEL_GRACE) {
            tracing::error!(
                running = ctx.engine.running(),
                "jobs did not stop after cancellation; exiting anyway"
            );
            break;
        }
        if last_extend.is_none_or(|t| now.duration_since(t) >= EXTEND_EVERY) {
            let line = format!("draining: {}", status_line(&ctx.engine, &ctx.service));
            let usec = EXTEND_BY.as_micros().min(u32::MAX as u128) as u32;
            notifier.send(&[
                NotifyState::ExtendTimeoutUsec(usec),
                NotifyState::Status(&line),
            ]);
            last_extend = Some(now);
        }
        let _ = tokio::time::timeout(Duration::from_millis(250), changes.changed()).await;
    }
    tracing::info!(
        elapsed_ms = start.elapsed().as_millis() as u64,
        "drain complete"
    );
}
