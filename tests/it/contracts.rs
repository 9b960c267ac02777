//! Rust <-> WGSL contracts that cannot drift silently: every kernel's parameter block, as naga
//! parses the kernel's WGSL, against the Rust struct the engine writes into the uniform arena.
//! Each WGSL member must sit at the offset, with the scalar type, of the Rust field the engine
//! fills for it, and the blocks must be the same size. Each Rust struct is filled with distinct
//! values, and every named WGSL member is read back from those bytes at its own offset. And every
//! kernel's declared storage bindings (`Kernel::bindings`, from the one list in `gpu::kernels`)
//! against the globals its entry point uses, with their access.

use naga::valid::{Capabilities, GlobalUse, ValidationFlags, Validator};
use naga::{AddressSpace, ScalarKind, StorageAccess, TypeInner};
use tokenmeter::gpu::kernels::{
    Access, EmbedParams, FillParams, HeadParams, MatmulParams, PairParams, ProbeParams, RmsNormParams,
};
use tokenmeter::gpu::WeightFormat;
use tokenmeter::gpu::{Kernel, WeightStorage};

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    U(u32),
    F(f32),
}

/// The bytes the engine writes for `kernel` and the value each WGSL member must read from them.
fn rust_side(kernel: Kernel) -> (Vec<u8>, Vec<(&'static str, V)>) {
    use V::{F, U};
    let bytes = |b: &[u8]| b.to_vec();
    let head = HeadParams {
        n_tokens: 1,
        n_heads: 2,
        n_kv_heads: 3,
        head_dim: 4,
        qkv_width: 5,
        block_size: 6,
        max_blocks: 7,
        eps_or_scale: 0.5,
        splits: 9,
        token_begin: 10,
        direct: 11,
        eps: 0.75,
    };
    let head_fields = |last: (&'static str, V), more: &[(&'static str, V)]| {
        let mut f = vec![
            ("n_tokens", U(1)),
            ("n_heads", U(2)),
            ("n_kv_heads", U(3)),
            ("head_dim", U(4)),
            ("qkv_width", U(5)),
            ("block_size", U(6)),
            ("max_blocks", U(7)),
            last,
        ];
        f.extend_from_slice(more);
        f
    };
    let pair = PairParams { a: 11, b: 22, _pad: [0; 2] };
    match kernel {
        Kernel::Embed => (
            bytes(bytemuck::bytes_of(&EmbedParams { n_tokens: 1, hidden: 2, row_start: 3, row_count: 4 })),
            vec![("n_tokens", U(1)), ("hidden", U(2)), ("row_start", U(3)), ("row_count", U(4))],
        ),
        Kernel::RmsNorm => (
            bytes(bytemuck::bytes_of(&RmsNormParams { n_rows: 1, width: 2, eps: 0.25, _pad: 0 })),
            vec![("n_rows", U(1)), ("width", U(2)), ("eps", F(0.25))],
        ),
        Kernel::Matmul
        | Kernel::MatmulWide
        | Kernel::MatmulTall
        | Kernel::MatmulM1
        | Kernel::MatmulM1Subgroup
        | Kernel::MatmulSmallSubgroup
        | Kernel::MatmulWideSubgroup
        | Kernel::MatmulTallSubgroup
        | Kernel::MatmulGemv
        | Kernel::MatmulTiled
        | Kernel::MatmulGemvNorm
        | Kernel::MatmulTiledNorm
        | Kernel::MatmulGemvSwiGlu
        | Kernel::MatmulGemvSubgroup
        | Kernel::MatmulGemvNormSubgroup
        | Kernel::MatmulGemvSwiGluSubgroup => (
            bytes(bytemuck::bytes_of(&MatmulParams {
                m: 1,
                n: 2,
                k: 3,
                row_start: 4,
                rows: 5,
                accumulate: 6,
                eps: 0.125,
                flags: 7,
            })),
            vec![
                ("m", U(1)),
                ("n", U(2)),
                ("k", U(3)),
                ("row_start", U(4)),
                ("rows", U(5)),
                ("accumulate", U(6)),
                ("eps", F(0.125)),
                ("flags", U(7)),
            ],
        ),
        Kernel::QkNormRope | Kernel::QkNormRopeGpu => {
            (bytes(bytemuck::bytes_of(&head)), head_fields(("eps", F(0.5)), &[]))
        }
        Kernel::Attention
        | Kernel::AttentionSplit
        | Kernel::AttentionSplitGpu
        | Kernel::AttentionSplitGpuRope
        | Kernel::AttentionPrefillGpu
        | Kernel::AttentionPrefillCpu => (
            bytes(bytemuck::bytes_of(&head)),
            head_fields(
                ("scale", F(0.5)),
                &[("splits", U(9)), ("token_begin", U(10)), ("direct", U(11)), ("eps", F(0.75))],
            ),
        ),
        Kernel::AttentionMerge => (
            bytes(bytemuck::bytes_of(&head)),
            head_fields(("scale", F(0.5)), &[("splits", U(9)), ("token_begin", U(10)), ("direct", U(11))]),
        ),
        Kernel::SwiGlu => (bytes(bytemuck::bytes_of(&pair)), vec![("n_tokens", U(11)), ("inter", U(22))]),
        Kernel::Argmax | Kernel::Sample => {
            (bytes(bytemuck::bytes_of(&pair)), vec![("n_rows", U(11)), ("width", U(22))])
        }
        Kernel::FillRandomBf16 => (
            bytes(bytemuck::bytes_of(&FillParams {
                seed: 1,
                scale: 0.25,
                cols: 3,
                row0: 4,
                word_offset: 5,
                words: 6,
                _pad: [0; 2],
            })),
            vec![
                ("seed", U(1)),
                ("scale", F(0.25)),
                ("cols", U(3)),
                ("row0", U(4)),
                ("word_offset", U(5)),
                ("words", U(6)),
            ],
        ),
        Kernel::RooflineFill
        | Kernel::CopyBlocked
        | Kernel::CopyStrided
        | Kernel::ReadBlocked
        | Kernel::ReadStrided
        | Kernel::ReadRows
        | Kernel::ReadRowsTexture
        | Kernel::FmaRate
        | Kernel::CopyTexture => (
            bytes(bytemuck::bytes_of(&ProbeParams { n: 1, per_lane: 2, iters: 3, _pad: 0 })),
            vec![("n", U(1)), ("per_lane", U(2)), ("iters", U(3))],
        ),
    }
}

#[test]
fn every_kernels_parameter_block_matches_its_rust_struct() {
    for &kernel in Kernel::ALL {
        let (source, entry) = kernel.source(WeightStorage::Buffer, WeightFormat::Bf16);
        let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{entry}: {e}"));
        assert!(module.entry_points.iter().any(|e| e.name == entry), "{entry}: no such entry point");
        let uniform = module
            .global_variables
            .iter()
            .map(|(_, v)| v)
            .find(|v| v.binding.as_ref().is_some_and(|b| b.group == 0 && b.binding == 0))
            .unwrap_or_else(|| panic!("{entry}: no parameter block at @group(0) @binding(0)"));
        let TypeInner::Struct { members, span } = &module.types[uniform.ty].inner else {
            panic!("{entry}: the parameter block is not a struct")
        };
        let (bytes, fields) = rust_side(kernel);
        assert_eq!(
            *span as usize,
            bytes.len(),
            "{entry}: WGSL Params is {span} bytes, the Rust struct {}",
            bytes.len()
        );
        let mut named = Vec::new();
        for m in members {
            let name = m.name.clone().unwrap_or_default();
            if name.starts_with('_') {
                continue; // padding, or a shared struct's fields this kernel does not read
            }
            let at = m.offset as usize;
            let word: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
            let got = match &module.types[m.ty].inner {
                TypeInner::Scalar(s) if s.kind == ScalarKind::Uint && s.width == 4 => V::U(u32::from_le_bytes(word)),
                TypeInner::Scalar(s) if s.kind == ScalarKind::Float && s.width == 4 => V::F(f32::from_le_bytes(word)),
                other => panic!("{entry}: member {name} has type {other:?} (parameter blocks hold u32 and f32)"),
            };
            let want = fields
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("{entry}: WGSL member {name} has no Rust counterpart"))
                .1;
            assert_eq!(
                got, want,
                "{entry}: member {name} at offset {at} reads {got:?} from the Rust bytes, not {want:?}"
            );
            named.push(name);
        }
        for (name, _) in &fields {
            assert!(
                named.iter().any(|n| n == name),
                "{entry}: the Rust side fills {name}, which the WGSL does not declare"
            );
        }
    }
}

#[test]
fn every_kernels_declared_bindings_match_what_its_entry_point_uses() {
    for &kernel in Kernel::ALL {
        let (source, entry) = kernel.source(WeightStorage::Buffer, WeightFormat::Bf16);
        let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{entry}: {e}"));
        let info = Validator::new(ValidationFlags::all(), Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{entry}: {e:?}"));
        let index = module.entry_points.iter().position(|e| e.name == entry).expect("entry point");
        let uses = info.get_entry_point(index);
        let declared = kernel.bindings();
        for (handle, var) in module.global_variables.iter() {
            let Some(binding) = &var.binding else { continue };
            let used = !uses[handle].is_empty();
            if binding.group != 0 || binding.binding == 0 || !used {
                continue;
            }
            let slot = binding.binding as usize;
            assert!(
                slot <= declared.len(),
                "{entry}: uses @binding({slot}), but its declaration lists {} storage bindings",
                declared.len()
            );
            if declared[slot - 1] == Access::Texture {
                let is_texture = matches!(module.types[var.ty].inner, TypeInner::Image { .. });
                assert!(is_texture, "{entry}: @binding({slot}) is declared a texture in gpu::kernels");
                continue;
            }
            let AddressSpace::Storage { access } = var.space else {
                panic!("{entry}: @binding({slot}) is not a storage buffer")
            };
            let writable = access.contains(StorageAccess::STORE);
            let want_writable = declared[slot - 1] == Access::Write;
            assert_eq!(
                writable,
                want_writable,
                "{entry}: @binding({slot}) is declared {:?} in gpu::kernels but is {} in the WGSL",
                declared[slot - 1],
                if writable { "read_write" } else { "read" }
            );
            assert!(writable || !uses[handle].contains(GlobalUse::WRITE), "{entry}: writes read-only @binding({slot})");
        }
        for slot in 1..=declared.len() {
            let present = module
                .global_variables
                .iter()
                .any(|(_, v)| v.binding.as_ref().is_some_and(|b| b.group == 0 && b.binding as usize == slot));
            assert!(present, "{entry}: declared binding {slot} is not in the WGSL");
        }
    }
}

/// Every weights block (bf16, int8, int4; buffer or texture) swapped into every kernel that reads
/// weights parses and validates, and keeps the weights at binding 2 of the declared kind.
#[test]
fn every_weights_form_compiles_into_every_kernel_that_reads_weights() {
    for &kernel in Kernel::ALL.iter().filter(|k| k.bindings().contains(&Access::Weights)) {
        for storage in [WeightStorage::Buffer, WeightStorage::Texture] {
            for format in WeightFormat::ALL {
                let (source, entry) = kernel.source(storage, format);
                let what = format!("{entry} ({storage:?}, {format})");
                let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{what}: {e}"));
                Validator::new(ValidationFlags::all(), Capabilities::all())
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let slot = 1 + kernel.bindings().iter().position(|&a| a == Access::Weights).unwrap();
                let var = module
                    .global_variables
                    .iter()
                    .map(|(_, v)| v)
                    .find(|v| v.binding.as_ref().is_some_and(|b| b.group == 0 && b.binding as usize == slot))
                    .unwrap_or_else(|| panic!("{what}: no weights at @binding({slot})"));
                let is_texture = matches!(module.types[var.ty].inner, TypeInner::Image { .. });
                assert_eq!(is_texture, storage == WeightStorage::Texture, "{what}: weights binding kind");
            }
        }
    }
}
