"""The intermediate representation: dtypes and promotion (`dtypes`), abstract values
(`abstract`), the SSA form (`ssa`, with its params' types in `params`), the builder that
specialisation and rules emit equations into (`builder`), its text form (`printer`, `parser`),
the verifier (`verify`) and the registry of primitive names (`registry`)."""
