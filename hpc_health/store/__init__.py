"""The results store: run directories (the truth), the index derived from
them, run sets, reference files, reference capture, baselines, export and
import.  Imports no ReFrame and renders no text."""
