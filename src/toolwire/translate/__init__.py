"""Pure translation between the Responses API and Chat Completions.

``translate_request`` turns a Responses request into a Chat Completions request;
``ChatStreamTranslator`` turns upstream chunks into Responses stream events;
``translate_completion`` does the same for a non-streaming answer. No I/O here.
"""
