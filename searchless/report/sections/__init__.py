"""The report's sections: each reads its step's artefacts from a `Context` and returns a `Section`.

A section whose artefacts are missing says "not run" with the command that makes
them (`Context.not_run`); it adds its headline numbers and facts to the context
for the summary, which is built last.
"""
