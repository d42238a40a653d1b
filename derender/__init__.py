"""The composition root, above the ground package `derender_queue`: the
`derender` console script (`cli`), the newcomer's `run` (API + worker) and
`batch`. The only code that imports worker/ and api/."""
