"""Editor backends behind one interface (``Editor``): slots (offline), llm (RARR), seq2seq (PURR)."""

from middleware.revise.editors.llm_editor import LLMEditor
from middleware.revise.editors.seq2seq_editor import FID_TEMPLATE, Seq2SeqEditor, fid_inputs
from middleware.revise.editors.slots_editor import SlotsEditor

__all__ = ["FID_TEMPLATE", "LLMEditor", "Seq2SeqEditor", "SlotsEditor", "fid_inputs"]
