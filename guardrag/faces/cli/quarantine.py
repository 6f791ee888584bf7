"""`guardrag quarantine`: the entries each knowledge base holds back, and their release.

An entry is held back at ingest (instructions for a model, a broken output invariant, a
sentence that does not belong) or when it was served and broke an invariant; each record says
which rule, why, and which sentence. `release KB SOURCE_ID` clears one: the entry's current
text is put on the KB's release list and its file is ingested again.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from guardrag.config.settings import load_settings, validate_kb_name

quarantine_app = typer.Typer(
    help="Entries held back from knowledge bases: list them, release one.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: Rich costs a tenth of a second to import
)


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


def _name(kb: str) -> str:
    try:
        return validate_kb_name(kb)
    except ValueError as exc:
        raise _fail(str(exc)) from None


@quarantine_app.command("list")
def list_held(
    kb: Annotated[str | None, typer.Option("--kb", help="Only this knowledge base.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Every held-back entry: KB, source id, stage, rule, location, and the sentence or why."""
    from guardrag.core.kb.holdback import QuarantineError, held  # lazy: with the index
    from guardrag.core.store import store_from_settings  # lazy: the index engine loads here

    store = store_from_settings(load_settings())
    try:
        rows = held(store, _name(kb) if kb else None)
    except QuarantineError as exc:
        raise _fail(str(exc)) from None
    finally:
        store.close()
    for name, record in rows:
        if as_json:
            typer.echo(json.dumps({"kb": name, **record}, ensure_ascii=False))
            continue
        said = record.get("sentence") or record.get("why", "")
        typer.echo(
            f"{name}\t{record.get('source_id')}\t{record.get('stage', 'ingest')}\t"
            f"{record.get('rule', '')}\t{record.get('location', '')}\t{said!r}"
        )
    if not rows and not as_json:
        typer.echo("no entries held back")


@quarantine_app.command()
def release(
    kb: Annotated[str, typer.Argument(help="The knowledge base.")],
    source_id: Annotated[str, typer.Argument(help="The held-back entry's source id.")],
) -> None:
    """Release one held-back entry: it is indexed again from its file (an entry edited since
    it was held back is screened again)."""
    from guardrag.core.embedder import load_embedder  # lazy: the model loads to re-ingest
    from guardrag.core.kb.holdback import QuarantineError  # lazy: with the index
    from guardrag.core.kb.holdback import release as run_release  # lazy: with the index
    from guardrag.core.store import store_from_settings  # lazy: the index engine loads here

    name = _name(kb)
    store = store_from_settings(load_settings())
    try:
        report = run_release(store, load_embedder(), name, source_id)
    except QuarantineError as exc:
        raise _fail(str(exc)) from None
    finally:
        store.close()
    for entry in report.flagged:
        typer.secho(f"still quarantined: {entry}", fg=typer.colors.YELLOW, err=True)
    typer.echo(f"released {source_id!r} from {name!r}; {report.summary()}")
