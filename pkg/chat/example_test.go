package chat_test

import (
	"encoding/json"
	"fmt"

	"github.com/ellm-dev/ellm/pkg/chat"
)

func ExampleTemplate_Render() {
	tmpl, err := chat.New(`{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}`, chat.SpecialTokens{EOS: "<|im_end|>"})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := tmpl.Render(chat.Input{
		Messages:            json.RawMessage(`[{"role": "user", "content": "Hi"}]`),
		AddGenerationPrompt: true,
		Kwargs:              json.RawMessage(`{"enable_thinking": false}`),
	})
	fmt.Printf("%q, %v\n", out, err)
	// Output: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", <nil>
}
