//! A partition whose A, B and C are not evaluated yet: its witness and its circuit's recorded
//! shape. It holds the assignment alone (32 bytes per variable) while it waits for the
//! device; the evaluations are made when the device stage takes it, straight into
//! page-locked blocks where the pool has room.

use std::mem::MaybeUninit;
use std::sync::Arc;

use blstrs::Scalar;

use super::{Partition, PinnedPool, Scalars};
use crate::synth::{Matrix, R1cs, ShapeError, Witness};

/// A witness and the shape it is an assignment of.
pub struct WitnessPartition {
    /// The assignment.
    pub witness: Witness,
    /// The circuit's constraints.
    pub shape: Arc<R1cs>,
}

impl WitnessPartition {
    /// Pairs `witness` with `shape`, checking that it fits.
    pub fn new(witness: Witness, shape: Arc<R1cs>) -> Result<Self, ShapeError> {
        shape.check(&witness)?;
        Ok(Self { witness, shape })
    }

    /// Host bytes it holds (the shape is the parameter set's, not the partition's).
    pub fn host_bytes(&self) -> u64 {
        self.witness.host_bytes()
    }

    /// Host bytes its evaluations will take.
    pub fn evaluated_bytes(&self) -> u64 {
        (3 * self.shape.num_constraints() * std::mem::size_of::<Scalar>()) as u64
    }

    /// Evaluates A, B and C on the current rayon pool, into blocks of `pinned` where it has
    /// room, and copies the aux assignment there too: the partition the prover takes.
    pub fn evaluate(self, pinned: Option<&PinnedPool>) -> Result<Partition, ShapeError> {
        let Self { witness, shape } = self;
        let eval = |m: &Matrix| -> Result<Scalars, ShapeError> {
            let n = shape.num_constraints();
            if let Some(pool) = pinned {
                let mut outcome = Ok(());
                // SAFETY: `R1cs::evaluate` writes every element when it succeeds; when it
                // fails the lease is dropped unread.
                let lease = unsafe {
                    pool.lease_filled(n, |out| outcome = shape.evaluate(m, &witness, out))
                };
                if let Some(lease) = lease {
                    outcome?;
                    return Ok(Scalars::Pinned(lease));
                }
            }
            let mut v: Vec<Scalar> = Vec::with_capacity(n);
            let out: &mut [MaybeUninit<Scalar>] = &mut v.spare_capacity_mut()[..n];
            shape.evaluate(m, &witness, out)?;
            // SAFETY: `evaluate` succeeded, so it wrote all `n` elements of the capacity.
            unsafe { v.set_len(n) };
            Ok(Scalars::Heap(v))
        };
        let (a, b, c) = (eval(&shape.a)?, eval(&shape.b)?, eval(&shape.c)?);
        let aux = Scalars::from(witness.aux);
        let aux = match pinned {
            Some(pool) => aux.pin(pool),
            None => aux,
        };
        Ok(Partition {
            a,
            b,
            c,
            input: witness.input,
            aux,
            a_aux_density: shape.a_aux_density.clone(),
            b_input_density: shape.b_input_density.clone(),
            b_aux_density: shape.b_aux_density.clone(),
        })
    }
}
