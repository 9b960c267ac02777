//! Reading GPU buffers back, with one async path on both targets: natively the device is polled
//! until the map callback fires; in the browser the callback fires on its own and we only await.

use crate::error::{Error, Result};

/// Copies `bytes` bytes of `src` into a fresh mappable buffer and returns them.
/// For the engine's hot path use [`Staging`], which keeps its buffer.
pub async fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    bytes: u64,
) -> Result<Vec<u8>> {
    let staging = Staging::new(device, "readback", bytes);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("readback") });
    staging.copy_from(&mut encoder, src, bytes);
    queue.submit([encoder.finish()]);
    staging.read(device, bytes).await
}

pub async fn read_f32(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    count: usize,
) -> Result<Vec<f32>> {
    let bytes = read_buffer(device, queue, src, (count * 4) as u64).await?;
    Ok(bytemuck::pod_collect_to_vec(&bytes))
}

/// A reusable MAP_READ buffer.
pub struct Staging {
    buffer: wgpu::Buffer,
}

impl Staging {
    pub fn new(device: &wgpu::Device, label: &str, bytes: u64) -> Staging {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Staging { buffer }
    }

    /// Unmaps the buffer, cancelling a mapping still pending (its reader was dropped).
    pub fn abandon(&self) {
        self.buffer.unmap();
    }

    pub fn copy_from(&self, encoder: &mut wgpu::CommandEncoder, src: &wgpu::Buffer, bytes: u64) {
        encoder.copy_buffer_to_buffer(src, 0, &self.buffer, 0, bytes.next_multiple_of(4));
    }

    /// Waits for the copy and returns the first `bytes` bytes.
    pub async fn read(&self, device: &wgpu::Device, bytes: u64) -> Result<Vec<u8>> {
        Ok(self.read_timed(device, bytes).await?.0)
    }

    /// [`Staging::read`], with the moment ([`crate::clock::now_s`]) the map callback ran: the
    /// earliest the CPU can know the data is there. What runs between it and the caller's resumption
    /// (in the page: other tasks of the main thread) is the lag a token's timestamp carries.
    pub async fn read_timed(&self, device: &wgpu::Device, bytes: u64) -> Result<(Vec<u8>, f64)> {
        let pending = self.begin_read(bytes);
        self.finish_read(device, pending, None).await
    }

    /// Asks for the buffer's first `bytes` bytes once the GPU work submitted so far (the copy into
    /// it) is done, without waiting. Called right after the submission that fills it, the mapping
    /// does not wait for work submitted later (CPU/GPU overlap: step n + 1 runs while step n's ids
    /// come back).
    pub fn begin_read(&self, bytes: u64) -> PendingRead {
        let size = bytes.next_multiple_of(4);
        let (tx, rx) = futures_channel::oneshot::channel();
        self.buffer.map_async(wgpu::MapMode::Read, 0..size, move |r| {
            let _ = tx.send(r.map(|()| crate::clock::now_s()));
        });
        PendingRead { rx, bytes }
    }

    /// Waits for a [`Staging::begin_read`] and returns its bytes, with the moment its map callback
    /// ran. Natively the device is polled until `submission` is done (`None`: everything
    /// submitted so far, which would stamp earlier work as late as the latest).
    pub async fn finish_read(
        &self,
        device: &wgpu::Device,
        pending: PendingRead,
        submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<(Vec<u8>, f64)> {
        let PendingRead { rx, bytes } = pending;
        let size = bytes.next_multiple_of(4);
        #[cfg(not(target_arch = "wasm32"))]
        if let Err(e) = device.poll(wgpu::PollType::Wait { submission_index: submission, timeout: None }) {
            // A submission that failed (the device was lost meanwhile) has no index to wait for:
            // wait for what did go through, which runs the device's callbacks (its loss, which
            // the caller reports in place of this error).
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
            return Err(Error::Gpu(format!("device poll failed: {e}")));
        }
        #[cfg(target_arch = "wasm32")]
        let _ = (device, submission);
        let resolved_s = rx
            .await
            .map_err(|_| Error::Gpu("buffer map callback dropped".into()))?
            .map_err(|e| Error::Gpu(format!("buffer map failed: {e}")))?;
        let out = {
            let view = self.buffer.get_mapped_range(0..size).map_err(|e| Error::Gpu(format!("mapped range: {e}")))?;
            view[..bytes as usize].to_vec()
        };
        self.buffer.unmap();
        Ok((out, resolved_s))
    }
}

/// A mapping asked for by [`Staging::begin_read`], not yet awaited.
pub struct PendingRead {
    rx: futures_channel::oneshot::Receiver<std::result::Result<f64, wgpu::BufferAsyncError>>,
    bytes: u64,
}
