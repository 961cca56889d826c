"""LangChain integration: a callback handler that fact-checks any model's streamed tokens,
and a Runnable wrapper that streams a chat model's answer annotated (or corrected) the way
the proxy does (block mode: stopped at a contradicted sentence, ``FactCheckBlocked``). Both use the proxy's checker, budget and concurrency caps (``CheckRunner``).
For a model behind the proxy itself, ``adapters.langchain.proxy.ProxyChatOpenAI`` (needs the
``langchain`` extra: langchain-openai, so it is not imported here) keeps the proxy's reports."""

from adapters.langchain.callback import FactCheckCallbackHandler
from adapters.langchain.runnable import FactCheckedChatModel
from adapters.langchain.session import FactCheckBlocked, FactCheckEvent, ReportEvent
from middleware.chat.protocol import BlockedEvent, SummaryEvent

__all__ = ["BlockedEvent", "FactCheckBlocked", "FactCheckCallbackHandler", "FactCheckedChatModel", "FactCheckEvent",
           "ReportEvent", "SummaryEvent"]
