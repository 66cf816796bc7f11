"""The one error of reading results back: a file that is not what it should be, named
with the field that is wrong."""


class ResultsError(ValueError):
    pass
