"""Editor backends behind one interface (``Editor``): slots (offline), llm (RARR), seq2seq (PURR)."""

from middleware.revise.editors.llm import LLMEditor
from middleware.revise.editors.seq2seq import FID_TEMPLATE, Seq2SeqEditor, fid_inputs
from middleware.revise.editors.slots import SlotsEditor

__all__ = ["FID_TEMPLATE", "LLMEditor", "Seq2SeqEditor", "SlotsEditor", "fid_inputs"]
