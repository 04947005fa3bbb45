"""A click command line."""

import click


@click.group()
def cli() -> None:
    """Greets people."""


@cli.command()
@click.option("--name", required=True)
@click.option("--count", default=1, type=int)
def greet(name: str, count: int) -> None:
    for _ in range(count):
        click.echo(f"Hello, {name}!")


if __name__ == "__main__":
    cli()
