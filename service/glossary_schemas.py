"""Request and response bodies of ``/v1/glossaries`` (``service.routes.glossaries``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.glossaries import MAX_ENTRIES, MAX_NAME_CHARS, GlossaryInfo
from service.schemas import LANGUAGE_PAIR, SERVED_LANGUAGES, GlossaryEntries, GlossaryEntry

# A served code on each side (an enum in the OpenAPI document, where the source side also lists
# "auto", which a glossary cannot be for).
GlossarySource = Annotated[
    str, Field(min_length=1, max_length=35, json_schema_extra={SERVED_LANGUAGES: "source", "not": {"const": "auto"}})
]
GlossaryTarget = Annotated[str, Field(min_length=1, max_length=35, json_schema_extra={SERVED_LANGUAGES: "target"})]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"\S", description="Not only spaces.")]


class GlossaryCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "name": "Animals",
                    "source_lang": "en",
                    "target_lang": "de",
                    "entries": [{"source": "dog", "target": "Hund"}],
                }
            ],
            LANGUAGE_PAIR: ["source_lang", "target_lang"],
            # Exactly one of entries and entries_text.
            "oneOf": [
                {"required": ["entries"], "properties": {"entries": {"type": "array"}}},
                {"required": ["entries_text"], "properties": {"entries_text": {"type": "string"}}},
            ],
        },
    )

    name: Name
    source_lang: GlossarySource = Field(description="A language the served models translate from.")
    target_lang: GlossaryTarget = Field(description="A language they translate into from source_lang.")
    entries: GlossaryEntries | None = None
    entries_text: str | None = Field(
        None,
        description="Instead of entries, as DeepL takes them: TSV (source<TAB>target a line) or CSV (source,target "
        "a row, or source,target,source_lang,target_lang: a row for other languages than the glossary's is left "
        "out); terms are case-insensitive.",
    )
    entries_format: Literal["tsv", "csv"] = Field("tsv", description="The format of entries_text.")

    @model_validator(mode="after")
    def _one_kind_of_entries(self) -> Self:
        if (self.entries is None) == (self.entries_text is None):
            raise ValueError("give either entries or entries_text")
        return self


class GlossaryPatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"entries": [{"source": "cat", "target": "Katze"}], "remove": ["dog"]}]},
    )

    name: Name | None = Field(None, description="A new name.")
    entries: Annotated[list[GlossaryEntry], Field(max_length=MAX_ENTRIES)] | None = Field(
        None,
        description="Entries to add; one whose source term the glossary has (as it matches) replaces that entry.",
    )
    remove: Annotated[list[str], Field(max_length=MAX_ENTRIES)] | None = Field(
        None, description="Source terms, as the glossary has them, whose entries to remove (before adding entries)."
    )


class GlossaryEntriesBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    entries: GlossaryEntries = Field(description="All the glossary's entries, in place of those it has.")


class GlossaryOut(BaseModel):
    glossary_id: str
    name: str
    source_lang: str
    target_lang: str
    creation_time: str = Field(description="ISO 8601, UTC.")
    entry_count: int = Field(ge=1)

    @classmethod
    def of(cls, info: GlossaryInfo, **more: Any) -> Self:
        return cls(**asdict(info), **more)


class GlossaryList(BaseModel):
    glossaries: list[GlossaryOut] = Field(description="The caller's glossaries, oldest first.")


class GlossaryWithEntries(GlossaryOut):
    entries: list[GlossaryEntry] = Field(description="In the order they were given.")
