"""registry — the runtime's packs and ops from Python: list_ops, list_packs,
load_pack, add_manifest (a third-party pack's ops then appear in mx.nd and
mx.sym on first access)."""
from ._ops import add_manifest, all_names as list_ops, find as op_info, list_packs, load_pack, manifest_gen

__all__ = ["add_manifest", "list_ops", "op_info", "list_packs", "load_pack", "manifest_gen"]
