"""Bridge from chat derender to the reasoning/tool parsers (filled in with the parsers)."""

from __future__ import annotations


class ChatParsing:
    @classmethod
    def create(cls, model, options, prompt_token_ids):
        if model.parser_factory is None:
            return None
        raise NotImplementedError("parsers are not wired yet")
